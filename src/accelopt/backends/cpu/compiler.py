"""Compile a C kernel into a shared object, cached by (source, flags, sizes, compiler version).

The compiler reads hostile text, so it runs under limits (``compiler_process.run_compiler``:
address space, CPU time, file size, no core file, a deadline, and a bounded capture of what it
prints), in a fresh directory of its own. Before it compiles, the preprocessed kernel is checked
(``check_preprocessed``: what macros spell); after it links, the object is
(``objects.check_object``: what the loader would do). Only an object that passed both reaches the
cache, read-only, with its SHA-256 recorded beside it; a cached object is loaded again only while
it still has that hash (and still passes the object check), else it is deleted and rebuilt
(``hashed_files.py``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import resource
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from accelopt.backends.base import BuildResult
from accelopt.backends.cpu.checks import check_before_preprocessing, check_preprocessed_output
from accelopt.backends.cpu.compiler_process import (
    COMPILER_FILE_BYTES,
    COMPILER_MEMORY_BYTES,
    effective_limit,
    run_compiler,
)
from accelopt.backends.cpu.hashed_files import hash_path, publish, recorded_hash, sha256_of
from accelopt.backends.cpu.objects import check_object
from accelopt.backends.faults import os_fault, unwritable
from accelopt.backends.status import Status
from accelopt.hardware.cpuinfo import cpu_model_name
from accelopt.hardware.toolchain import Compiler, target_flags

logger = logging.getLogger(__name__)

# The kernel contract's flags (docs/architecture.md, Contracts): -O3 -march=native (-mcpu=native
# on aarch64) -fopenmp -shared -fPIC; gnu11 keeps C11 with the GNU spellings intrinsics headers
# and `M_PI` rely on.
OPT_FLAGS: tuple[str, ...] = ("-O3",)
OTHER_FLAGS: tuple[str, ...] = ("-fopenmp", "-shared", "-fPIC", "-std=gnu11")
# How the object is linked. No start files: crtbeginS.o's frame_dummy (in .init_array) and crti.o's
# _init are what a C shared object runs at load time, and a kernel needs neither, so objects.py can
# refuse any code that runs at load time. No executable stack, the GOT read-only once relocated,
# and code in segments of its own (no constant is ever executable).
LINK_FLAGS: tuple[str, ...] = (
    "-nostartfiles",
    "-Wl,-z,noexecstack",
    "-Wl,-z,relro",
    "-Wl,-z,now",
    "-Wl,-z,separate-code",
)
LIBS: tuple[str, ...] = ("-lm",)
MAX_ERROR_LINES = 20

MAX_PREPROCESSED_BYTES = 16 << 20  # the -E output (kernel and headers) the checks read

SOURCE_NAME = "kernel.c"
HEADER_NAME = "accelopt_contract.h"
PREPROCESSED_NAME = "kernel.i"

_OUT_OF_MEMORY = re.compile(
    r"out of memory|memory exhausted|cannot allocate memory|bad_alloc", re.IGNORECASE
)
_FILE_TOO_LARGE = re.compile(r"file size limit exceeded|file too large", re.IGNORECASE)
_CPU_TIME = re.compile(r"CPU time limit exceeded", re.IGNORECASE)


def kernel_flags(cc: Compiler) -> tuple[str, ...]:
    """The flags every kernel is compiled with by ``cc`` (the target flag from
    ``toolchain.target_flags``), link flags included (a compile with ``-c`` ignores those)."""
    return (*OPT_FLAGS, *target_flags(cc), *OTHER_FLAGS, *LINK_FLAGS)


def prototype(n_inputs: int, n_outputs: int) -> str:
    """The contract's signature, force-included: a kernel with other arguments fails to build."""
    args = ["const float *"] * n_inputs + ["float *"] * n_outputs
    return f"void kernel({', '.join(args)});\n"


@dataclass(frozen=True)
class BuildInputs:
    """What a build of one kernel reads: its source, its sizes (``-D`` macros), the contract's
    prototype (force-included) and the compiler."""

    source: str
    defines: Mapping[str, int]
    signature: str
    cc: Compiler


def cache_key(inputs: BuildInputs) -> str:
    cc, defines = inputs.cc, repr(sorted(inputs.defines.items()))
    parts = [inputs.source, " ".join(kernel_flags(cc) + LIBS), defines, inputs.signature]
    parts += [*cc.command, cc.version, cpu_model_name()]  # -march=native depends on the CPU
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


# Where the compiler's messages point. kernel.c is the kernel's source verbatim
# (``build_directory``): the prototype is force-included (-include, its own file) and the sizes
# are -D macros, so nothing is prepended and "kernel.c:12:" is line 12 of the source as written.
# Only messages about the other two places are renamed, so that the reader knows they are not in
# the kernel.
_PLACES = (
    (f"./{HEADER_NAME}", f"{HEADER_NAME} (the contract's prototype, force-included)"),
    (HEADER_NAME, f"{HEADER_NAME} (the contract's prototype, force-included)"),
    ("<command-line>", "<command-line> (the sizes, -D macros)"),
)


def _rename_places(line: str) -> str:
    for place, name in _PLACES:
        if line.startswith(place) or line.startswith(f"In file included from {place}"):
            return line.replace(place, name, 1)
    return line


def trim_compiler_output(text: str, source_path: str) -> str:
    """Keep the lines that say what is wrong (errors and their context), with a short path;
    their line numbers are the kernel source's own (``_PLACES``)."""
    lines = [_rename_places(line.replace(source_path, SOURCE_NAME)) for line in text.splitlines()]
    keep: list[str] = []
    for i, line in enumerate(lines):
        if re.search(r"\berror\b|undefined reference", line):
            keep.extend(lines[i : i + 3])
    keep = list(dict.fromkeys(keep)) or lines[-MAX_ERROR_LINES:]
    if len(keep) > MAX_ERROR_LINES:
        keep = [*keep[:MAX_ERROR_LINES], f"... ({len(keep) - MAX_ERROR_LINES} more lines)"]
    return "\n".join(keep)


def _size(n_bytes: int) -> str:
    return f"{n_bytes >> 30} GiB" if n_bytes % (1 << 30) == 0 else f"{n_bytes / 2**20:g} MiB"


def _tool_lines(output: str) -> str:
    """The lines the compiler's programs wrote about themselves: not those about the kernel's
    text (``kernel.c:...``, source excerpts), which could quote anything."""
    own = (SOURCE_NAME, HEADER_NAME, " ", "\t")
    return "\n".join(line for line in output.splitlines() if not line.startswith(own))


def _limit_hit(output: str, memory_bytes: int, file_bytes: int, too_large: str) -> str | None:
    """The sentence for a compiler stopped by one of its limits, or None."""
    lines = _tool_lines(output)
    if _OUT_OF_MEMORY.search(lines):
        memory = _size(effective_limit(resource.RLIMIT_AS, memory_bytes))
        return f"the compiler ran out of its {memory} memory limit (a macro expansion too large?)"
    if _FILE_TOO_LARGE.search(lines):
        return too_large.format(size=_size(effective_limit(resource.RLIMIT_FSIZE, file_bytes)))
    if _CPU_TIME.search(lines):
        return "the compiler ran out of its CPU time limit"
    return None


# -- compile_kernel --------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelBuild:
    """One build: its private directory (the kernel's inputs written there), the compiler and its
    limits, and the deadline."""

    dir: Path
    inputs: BuildInputs
    deadline: float  # time.monotonic()
    timeout_s: float
    memory_bytes: int

    def execute(self, cmd: list[str], file_bytes: int = COMPILER_FILE_BYTES) -> tuple[int, str]:
        """Run ``cmd`` in the build directory under the build's limits: its exit code and what it
        printed; ``TimeoutExpired`` past the deadline."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(cmd, self.timeout_s)
        return run_compiler(
            cmd, left, cwd=self.dir, memory_bytes=self.memory_bytes, file_bytes=file_bytes
        )

    def run(self, cmd: list[str], file_bytes: int, too_large: str) -> BuildResult | None:
        """Run ``cmd`` in the build directory: None when it succeeded, else COMPILE_ERROR."""
        try:
            code, out = self.execute(cmd, file_bytes)
        except subprocess.TimeoutExpired:
            return BuildResult(Status.COMPILE_ERROR, f"compilation ran past {self.timeout_s:g} s")
        if code == 0:
            return None
        reason = _limit_hit(out, self.memory_bytes, file_bytes, too_large)
        return BuildResult(Status.COMPILE_ERROR, reason or trim_compiler_output(out, SOURCE_NAME))

    def command(self, *args: str, shared: bool = True) -> list[str]:
        """The compiler with the contract's flags (``shared=False``: without ``-shared``, for an
        object file), prototype and sizes, then ``args``."""
        cc = self.inputs.cc
        flags = [flag for flag in kernel_flags(cc) if shared or flag != "-shared"]
        defines = [f"-D{k}={v}" for k, v in self.inputs.defines.items()]
        return [*cc.command, *flags, "-include", HEADER_NAME, *defines, *args]


@contextmanager
def build_directory(
    inputs: BuildInputs,
    timeout_s: float,
    *,
    memory_bytes: int = COMPILER_MEMORY_BYTES,
    prefix: str = "accelopt-build-",
    parent: Path | None = None,
) -> Iterator[KernelBuild]:
    """A build in a fresh directory (under ``parent``) holding the source as ``kernel.c`` and the
    prototype as its header, its deadline ``timeout_s`` from now; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir=parent) as name:
        directory = Path(name)
        (directory / SOURCE_NAME).write_text(inputs.source)
        (directory / HEADER_NAME).write_text(inputs.signature)
        yield KernelBuild(directory, inputs, time.monotonic() + timeout_s, timeout_s, memory_bytes)


def _check_preprocessed(build: KernelBuild) -> BuildResult | None:
    """REJECTED when the source or its preprocessed text is refused (``checks.py``),
    COMPILE_ERROR when it does not preprocess, None when it may be compiled."""
    reason = check_before_preprocessing(build.inputs.source)
    if reason:
        return BuildResult(Status.REJECTED, reason)
    failed = build.run(
        build.command("-E", "-o", PREPROCESSED_NAME, SOURCE_NAME),
        MAX_PREPROCESSED_BYTES,
        "the preprocessed kernel is over {size} (a macro expansion too large?)",
    )
    if failed:
        return failed
    with (build.dir / PREPROCESSED_NAME).open(encoding="utf-8", errors="replace") as lines:
        reason = check_preprocessed_output(lines, build.inputs.cc.arch)
    return BuildResult(Status.REJECTED, reason) if reason else None


def check_preprocessed(
    inputs: BuildInputs, *, timeout_s: float = 60.0, memory_bytes: int = COMPILER_MEMORY_BYTES
) -> str | None:
    """Why the kernel must be rejected once its macros are expanded, or None (also when it does
    not preprocess in time: the build reports that). Runs the compiler's preprocessor with the
    build's flags, prototype and sizes, under the build's limits; ``checks.py`` reads the output
    (``check_preprocessed_output``). ``compile_kernel`` runs this check itself."""
    with build_directory(
        inputs, timeout_s, memory_bytes=memory_bytes, prefix="accelopt-preprocess-"
    ) as build:
        result = _check_preprocessed(build)
    return result.error if result is not None and result.status is Status.REJECTED else None


def _reusable(target: Path) -> bool:
    """Whether the cached object may be loaded: it has the hash recorded when it was built and
    still passes the object check. Otherwise (replaced, altered, no hash) it is deleted, so that
    it is built again and never loaded."""
    try:
        actual = sha256_of(target)
    except OSError:  # not cached (or deleted meanwhile)
        return False
    recorded = recorded_hash(target)
    if recorded is None:
        why = "no recorded hash"
    elif recorded != actual:
        why = "its hash differs"
    else:
        why = check_object(target)
        if why is None:
            return True
    logger.warning(
        "the cached kernel object %s is not the one built (%s): deleted, building it again",
        target,
        why,
    )
    target.unlink(missing_ok=True)
    hash_path(target).unlink(missing_ok=True)
    return False


def _compile_checked(build: KernelBuild, target: Path) -> BuildResult:
    """Check the preprocessed kernel, compile it, check the object, and cache it."""
    failed = _check_preprocessed(build)
    if failed:
        return failed
    unique = f"{os.getpid()}.{threading.get_ident()}"
    built = target.absolute().with_name(f".{target.name}.{unique}.tmp")
    try:
        failed = build.run(
            build.command("-o", str(built), SOURCE_NAME, *LIBS),
            COMPILER_FILE_BYTES,
            "the compiler wrote a file over its {size} limit (an initializer too large?)",
        )
        if failed:
            return failed
        reason = check_object(built)
        if reason:
            return BuildResult(Status.REJECTED, reason)
        publish(built, target)
    finally:
        built.unlink(missing_ok=True)
    return BuildResult(None, artifact=target)


def compile_kernel(
    inputs: BuildInputs,
    work_dir: Path,
    cache_dir: Path,
    timeout_s: float,
    *,
    memory_bytes: int = COMPILER_MEMORY_BYTES,
) -> BuildResult:
    """Compile the source with the sizes as ``-D`` defines; reuse the cached object when it is
    still the one built. REJECTED when the preprocessed kernel or the object is refused,
    COMPILE_ERROR when the compiler fails, hits a limit or runs past ``timeout_s`` (for the
    preprocessing and the compile together). The compiler works in a fresh directory under
    ``work_dir``: a quoted ``#include`` finds nothing there but the kernel. A build that failed
    for want of disk or permission says so in ``service`` (``backends/faults.py``)."""
    start = time.perf_counter()
    target = cache_dir / f"{cache_key(inputs)}.so"
    if _reusable(target):
        return BuildResult(None, artifact=target, seconds=time.perf_counter() - start, cached=True)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with build_directory(inputs, timeout_s, memory_bytes=memory_bytes, parent=work_dir) as b:
            result = _compile_checked(b, target)
    except OSError as exc:
        fault = os_fault(exc, "building the kernel")
        if not fault:
            raise
        return BuildResult(
            Status.COMPILE_ERROR, fault, seconds=time.perf_counter() - start, service=fault
        )
    if result.status is Status.COMPILE_ERROR:  # the machine's, when it cannot write now
        fault = unwritable([work_dir, cache_dir])
        if fault:
            result = replace(result, error=f"{fault} ({result.error})", service=fault)
    return replace(result, seconds=time.perf_counter() - start)
