"""Measure this CPU's ceilings on all its cores with three C micro-benchmarks.

- matmul_rate: ``microbench/flops.c`` built with ``-ffp-contract=fast``: independent FMA chains.
- vector_rate: the same source built with ``-ffp-contract=off``: a multiply then an add per update.
- bandwidth: ``microbench/triad.c``: the best of four STREAM-style patterns (triad, triad with
  non-temporal stores, read-only, four reads + one streamed write) over arrays far larger than the
  LLC. A ceiling must be one no kernel beats: a kernel that mostly reads or streams its stores
  beats the plain triad.

Each is built once with the system C compiler (``-O3 -march=native -fopenmp``) into
``cache_dir()/microbench/``, keyed by source, flags, compiler version and CPU model, run with
OMP_NUM_THREADS threads, and reports the best of several repeats as one JSON line.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from accelopt import settings
from accelopt.hardware.cpuinfo import (
    CACHE_SYSFS,
    CacheLevel,
    available_cpus,
    cache_levels,
    cpu_model_name,
    data_cache,
    llc_level_and_bytes,
)
from accelopt.hardware.isa import Isa, describe_isa, detect_isa
from accelopt.hardware.spec import HardwareSpec
from accelopt.hardware.toolchain import (
    Compiler,
    find_compiler,
    first_line,
    no_compiler,
    target_flags,
)

MICROBENCH_DIR = Path(__file__).parent / "microbench"
OPT_FLAGS = ("-O3", "-fopenmp")

FLOPS_ITERATIONS = 20_000_000  # per thread and repeat: about 40 ms at 4 GHz
FLOPS_REPEATS = 5
TRIAD_REPEATS = 10
TRIAD_MIN_ARRAY_BYTES = 64 * 2**20  # each of the 3 arrays; at least 4 x the LLC as STREAM asks
TRIAD_MAX_ARRAY_BYTES = 2**30
RUN_TIMEOUT_S = 120


@dataclass(frozen=True)
class Microbench:
    """One build of a micro-benchmark source."""

    name: str
    source: str
    flags: tuple[str, ...]


FMA = Microbench("fma", "flops.c", ("-ffp-contract=fast",))
VECTOR = Microbench("vector", "flops.c", ("-ffp-contract=off",))
TRIAD = Microbench("triad", "triad.c", ())


def base_flags(compiler: Compiler) -> tuple[str, ...]:
    """The flags kernels are built with (DESIGN.md), less those only a shared object needs."""
    return (OPT_FLAGS[0], *target_flags(compiler), *OPT_FLAGS[1:])


def build(bench: Microbench, compiler: Compiler) -> Path:
    """The executable of ``bench``, compiled once and kept under ``cache_dir()/microbench``."""
    source = MICROBENCH_DIR / bench.source
    flags = (*base_flags(compiler), *bench.flags)
    identity = "\n".join([*compiler.command, compiler.version, *flags, cpu_model_name()])
    digest = hashlib.sha256(source.read_bytes() + identity.encode()).hexdigest()[:16]
    exe = settings.cache_dir() / "microbench" / f"{bench.name}-{digest}"
    if exe.is_file():
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_name(f"{exe.name}.{os.getpid()}.tmp")
    _compile([*compiler.command, *flags, str(source), "-o", str(tmp)], bench, tmp)
    os.replace(tmp, exe)
    return exe


def _compile(command: list[str], bench: Microbench, output: Path) -> None:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise no_compiler(f"{command[0]!r} cannot be run: {exc}") from exc
    if proc.returncode != 0:
        output.unlink(missing_ok=True)
        detail = f"{command[0]!r} failed to build the {bench.name} micro-benchmark"
        raise no_compiler(f"{detail}: {first_line(proc.stderr)}")


def run(exe: Path, threads: int, *args: int) -> dict[str, float]:
    """Run a built micro-benchmark on ``threads`` OpenMP threads; its JSON line as a dict."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_PROC_BIND": "spread"}
    proc = subprocess.run(
        [str(exe), *(str(a) for a in args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"micro-benchmark {exe.name} failed (exit {proc.returncode}): {first_line(proc.stderr)}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def triad_elements(llc_bytes: int | None) -> int:
    """Floats per triad array: at least 64 MiB and 4 x the LLC (STREAM's rule), at most 1 GiB."""
    array_bytes = max(TRIAD_MIN_ARRAY_BYTES, 4 * (llc_bytes or 0))
    return min(array_bytes, TRIAD_MAX_ARRAY_BYTES) // 4


def measure_cpu(threads: int | None = None) -> HardwareSpec:
    """Measure this CPU's matmul and vector FLOP/s and its memory bandwidth on ``threads``
    threads (default: every CPU in this process's affinity mask). Takes about a second."""
    threads = threads or available_cpus()
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    compiler = find_compiler()
    isa = machine_isa(compiler)
    llc = llc_level_and_bytes()
    llc_bytes = llc[1] if llc else None
    fma = run(build(FMA, compiler), threads, FLOPS_ITERATIONS, FLOPS_REPEATS)
    vector = run(build(VECTOR, compiler), threads, FLOPS_ITERATIONS, FLOPS_REPEATS)
    n = triad_elements(llc_bytes)
    triad = run(build(TRIAD, compiler), threads, n, TRIAD_REPEATS)
    return HardwareSpec(
        name=f"cpu:{cpu_model_name()}",
        backend="cpu",
        matmul_rate=fma["rate"],
        vector_rate=vector["rate"],
        bandwidth=triad["bandwidth"],
        cores=threads,
        llc_bytes=llc_bytes,
        **machine_facts(isa),
        provenance={
            **_provenance(fma, vector, triad, n, threads, llc),
            **facts_provenance(isa, compiler),
        },
    )


def machine_isa(compiler: Compiler) -> Isa:
    """The ISA kernels are compiled for; a target the compiler rejects is the user's to fix."""
    try:
        return detect_isa(compiler)
    except ValueError as exc:
        hint = "; check ACCELOPT_CPU_TARGET" if settings.cpu_target() else ""
        raise no_compiler(f"{exc}{hint}") from exc


def _sharing(cache: CacheLevel) -> str:
    return "one per core" if cache.shared_by <= 1 else f"shared by {cache.shared_by} CPUs"


def machine_facts(isa: Isa, levels: list[CacheLevel] | None = None) -> dict[str, object]:
    """The HardwareSpec fields that describe the machine rather than measure it."""
    levels = cache_levels() if levels is None else levels
    l1d, l2 = data_cache(levels, 1), data_cache(levels, 2)
    return {
        "arch": isa.arch,
        "isa": isa.features,
        "vector_bits": isa.vector_bits or None,
        "l1d_bytes": l1d.size_bytes if l1d else None,
        "l2_bytes": l2.size_bytes if l2 else None,
    }


def facts_provenance(
    isa: Isa, compiler: Compiler, levels: list[CacheLevel] | None = None
) -> dict[str, str]:
    levels = cache_levels() if levels is None else levels
    flags = " ".join(isa.flags) or "its default target"
    provenance = {
        "isa": f"{compiler.command[0]} predefined macros under {flags}: {describe_isa(isa)}",
    }
    for field, level in (("l1d_bytes", 1), ("l2_bytes", 2)):
        cache = data_cache(levels, level)
        if cache is not None:
            provenance[field] = (
                f"sysfs: {CACHE_SYSFS}, level-{level} {cache.kind.lower()} cache, {_sharing(cache)}"
            )
    return provenance


def _provenance(
    fma: dict[str, float],
    vector: dict[str, float],
    triad: dict[str, float],
    n: int,
    threads: int,
    llc: tuple[int, int] | None,
) -> dict[str, str]:
    when = f"{threads} threads, {datetime.date.today().isoformat()}"
    fma_chains = f"{int(fma['chains'])} chains of {int(fma['vector_bits'])}-bit vectors"
    vec_chains = f"{int(vector['chains'])} chains of {int(vector['vector_bits'])}-bit vectors"
    array_mib = n * 4 / 2**20
    provenance = {
        "matmul_rate": f"measured: FMA micro-benchmark flops.c ({fma_chains}, "
        f"2 FLOP per lane per FMA), {when}",
        "vector_rate": f"measured: multiply+add micro-benchmark flops.c -ffp-contract=off "
        f"({vec_chains}, 1 FLOP per lane per instruction), {when}",
        "bandwidth": f"measured: best of four STREAM-style patterns in triad.c over arrays of "
        f"{array_mib:.0f} MiB (triad {triad['triad'] / 1e9:.1f}, triad with non-temporal "
        f"stores {triad['triad_nt'] / 1e9:.1f}, read-only {triad['read'] / 1e9:.1f}, 4 reads + "
        f"1 streamed write {triad['stream5'] / 1e9:.1f} GB/s), best of {TRIAD_REPEATS}, {when}",
        "cores": f"OpenMP threads used ({available_cpus()} CPUs in the affinity mask)",
    }
    if llc is not None:
        levels = cache_levels()
        shared = next((c for c in levels if c.level == llc[0] and c.kind == "Unified"), None)
        sharing = f", {_sharing(shared)}" if shared else ""
        provenance["llc_bytes"] = f"sysfs: {CACHE_SYSFS}, level-{llc[0]} unified cache{sharing}"
    return provenance
