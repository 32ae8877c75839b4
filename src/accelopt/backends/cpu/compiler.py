"""Compile a C kernel into a shared object, cached by (source, flags, sizes, compiler version)."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from accelopt.backends.base import BuildResult
from accelopt.backends.status import Status
from accelopt.hardware.cpuinfo import cpu_model_name
from accelopt.hardware.toolchain import Compiler, find_compiler, target_flags

# The kernel contract's flags (DESIGN.md): -O3 -march=native (-mcpu=native on aarch64) -fopenmp
# -shared -fPIC; gnu11 keeps C11 with the GNU spellings intrinsics headers and `M_PI` rely on.
OPT_FLAGS: tuple[str, ...] = ("-O3",)
OTHER_FLAGS: tuple[str, ...] = ("-fopenmp", "-shared", "-fPIC", "-std=gnu11")
LIBS: tuple[str, ...] = ("-lm",)
MAX_ERROR_LINES = 20


@cache
def compiler_for(cc: str) -> Compiler:
    """The working compiler named by ``CC`` (checked once per process); raises
    CompilerNotFoundError with one sentence when there is none."""
    del cc  # the cache key: find_compiler reads the same setting
    return find_compiler()


def kernel_flags(cc: Compiler) -> tuple[str, ...]:
    """The flags every kernel is compiled with by ``cc`` (the target flag from
    ``toolchain.target_flags``)."""
    return (*OPT_FLAGS, *target_flags(cc), *OTHER_FLAGS)


def prototype(n_inputs: int, n_outputs: int) -> str:
    """The contract's signature, force-included: a kernel with other arguments fails to build."""
    args = ["const float *"] * n_inputs + ["float *"] * n_outputs
    return f"void kernel({', '.join(args)});\n"


def cache_key(source: str, defines: Mapping[str, int], signature: str, cc: Compiler) -> str:
    parts = [source, " ".join(kernel_flags(cc) + LIBS), repr(sorted(defines.items())), signature]
    parts += [*cc.command, cc.version, cpu_model_name()]  # -march=native depends on the CPU
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def trim_compiler_output(text: str, source_path: str) -> str:
    """Keep the lines that say what is wrong (errors and their context), with a short path."""
    lines = [line.replace(source_path, "kernel.c") for line in text.splitlines()]
    keep: list[str] = []
    for i, line in enumerate(lines):
        if re.search(r"\berror\b|undefined reference", line):
            keep.extend(lines[i : i + 3])
    keep = list(dict.fromkeys(keep)) or lines[-MAX_ERROR_LINES:]
    if len(keep) > MAX_ERROR_LINES:
        keep = [*keep[:MAX_ERROR_LINES], f"... ({len(keep) - MAX_ERROR_LINES} more lines)"]
    return "\n".join(keep)


def run_compiler(cmd: list[str], timeout_s: float) -> tuple[int, str]:
    """Run the compiler in its own process group so a timeout kills cc1 and the linker too."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc.returncode, out


def compile_kernel(
    source: str,
    defines: Mapping[str, int],
    signature: str,
    work_dir: Path,
    cache_dir: Path,
    timeout_s: float,
    cc: Compiler,
) -> BuildResult:
    """Compile ``source`` with the sizes as ``-D`` defines; reuse the cached object when present."""
    start = time.perf_counter()
    key = cache_key(source, defines, signature, cc)
    target = cache_dir / f"{key}.so"
    if target.exists():
        return BuildResult(None, artifact=target, seconds=time.perf_counter() - start, cached=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    src = work_dir / "kernel.c"
    src.write_text(source)
    header = work_dir / "accelopt_contract.h"
    header.write_text(signature)
    tmp = cache_dir / f".{key}.{os.getpid()}.tmp"
    cmd = [*cc.command, *kernel_flags(cc), "-include", str(header)]
    cmd += [f"-D{k}={v}" for k, v in defines.items()]
    cmd += ["-o", str(tmp), str(src), *LIBS]
    try:
        code, out = run_compiler(cmd, timeout_s)
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        return BuildResult(Status.COMPILE_ERROR, f"compilation ran past {timeout_s:g} s")
    seconds = time.perf_counter() - start
    if code != 0:
        tmp.unlink(missing_ok=True)
        return BuildResult(Status.COMPILE_ERROR, trim_compiler_output(out, str(src)), None, seconds)
    os.replace(tmp, target)
    return BuildResult(None, artifact=target, seconds=seconds)
