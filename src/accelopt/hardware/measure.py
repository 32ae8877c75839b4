"""Measure this CPU's ceilings on all its cores with three C micro-benchmarks.

- matmul_rate: ``microbench/flops.c`` built with ``-ffp-contract=fast``: independent FMA chains.
- vector_rate: the same source built with ``-ffp-contract=off``: a multiply then an add per update.
- bandwidth: ``microbench/triad.c``: the best of STREAM-style patterns covering the read:write mixes
  the suite's kernels have (read-only, 1:1, 2:1, 3:1 and 4:1, each with regular and with
  non-temporal stores) over arrays far larger than the LLC. A ceiling must be one no honest kernel
  beats: a kernel that mostly reads or streams its stores beats the plain triad.

Each is built once with the system C compiler (``-O3 -march=native -fopenmp``) into
``cache_dir()/microbench/``, keyed by source, flags, compiler version and CPU model, run with
OMP_NUM_THREADS threads, and reports the best, median and worst of several repeats as one JSON
line. The ceiling is the best; the spread ``(best - median) / best`` of its repeats, the machine's
load before the measurement (``hardware.load``) and the hypervisor's steal during it say whether
the machine was quiet. A measurement taken while it was busy is ``provisional``: measured again
when it is quiet (``hardware.cache``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelopt import settings
from accelopt.errors import UserError
from accelopt.hardware.cpuinfo import (
    CACHE_SYSFS,
    CacheLevel,
    available_cpus,
    cache_levels,
    cpu_model_name,
    data_cache,
    last_level,
    llc_level_and_bytes,
)
from accelopt.hardware.isa import Isa, describe_isa, detect_isa, isa_from_compiler
from accelopt.hardware.load import Load, machine_load, read_cpu_times, steal_fraction
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

CEILINGS = ("matmul_rate", "vector_rate", "bandwidth")
FLOPS_ITERATIONS = 20_000_000  # per thread and repeat: about 40 ms at 4 GHz
FLOPS_REPEATS = 5
TRIAD_REPEATS = 6  # each repeat runs every pattern once: about 5 GB moved with 128 MiB arrays
TRIAD_MIN_ARRAY_BYTES = 64 * 2**20  # each of the 5 arrays; at least 4 x the LLC as STREAM asks
TRIAD_MAX_ARRAY_BYTES = 2**30
RUN_TIMEOUT_S = 120

# triad.c's patterns, in its order, with what each does (its arrays read : written).
PATTERNS = {
    "read": "read-only (4 arrays)",
    "copy": "1:1 memcpy",
    "scale": "1:1",
    "scale_nt": "1:1 non-temporal stores",
    "triad": "2:1 (STREAM triad)",
    "triad_nt": "2:1 non-temporal stores",
    "sum3": "3:1",
    "sum3_nt": "3:1 non-temporal stores",
    "sum4": "4:1",
    "sum4_nt": "4:1 non-temporal stores",
}
# Repeats whose median falls further below their best, (best - median) / best, were disturbed.
# The median, not the worst: one slow repeat (a page-table walk, a neighbour's burst) does not lower
# the best, a sustained disturbance does. Quiet, on a 2-core VM: FLOP loops within 3 %, DRAM
# streams 2-25 % (other guests share the memory bus); busy (load average 2.5-5): 25-50 %.
SPREAD_LIMITS = {"matmul_rate": 0.10, "vector_rate": 0.10, "bandwidth": 0.30}


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


def run(exe: Path, threads: int, *args: int) -> dict[str, Any]:
    """Run a built micro-benchmark on ``threads`` OpenMP threads; its JSON line as a dict."""
    env = {**settings.environment(), "OMP_NUM_THREADS": str(threads), "OMP_PROC_BIND": "spread"}
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
    """Floats per triad.c array: at least 64 MiB and 4 x the LLC (STREAM's rule), at most 1 GiB."""
    array_bytes = max(TRIAD_MIN_ARRAY_BYTES, 4 * (llc_bytes or 0))
    return min(array_bytes, TRIAD_MAX_ARRAY_BYTES) // 4


@dataclass(frozen=True)
class Figure:
    """One measured ceiling: its value, how much its repeats varied, and where it came from."""

    value: float
    spread: float
    provenance: str


@dataclass(frozen=True)
class Measurement:
    """Some ceilings measured together, and how busy the machine was meanwhile: ``load`` is read
    before the micro-benchmarks ran (their own threads would count), its steal over them."""

    figures: dict[str, Figure]
    load: Load

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the figures are provisional; empty when the machine was quiet."""
        return self.load.reasons + spread_reasons(self.figures)

    @property
    def provisional(self) -> bool:
        return bool(self.reasons)

    def describe(self) -> str:
        """The ``load`` provenance line: quiet, or provisional and why."""
        if self.provisional:
            return "provisional, measured while the machine was busy: " + "; ".join(self.reasons)
        return f"quiet during the measurement ({self.load.describe().removeprefix('quiet: ')})"


def spread(best: float, median: float) -> float:
    """How much repeats varied: ``(best - median) / best`` (0 when they agree)."""
    return max(0.0, (best - median) / best) if best > 0 else 0.0


def spread_reasons(figures: dict[str, Figure]) -> tuple[str, ...]:
    """The ceilings whose repeats varied more than a quiet machine's do."""
    return tuple(
        f"{name} repeats spread {figure.spread:.0%} (a quiet machine: under "
        f"{SPREAD_LIMITS[name]:.0%})"
        for name, figure in figures.items()
        if figure.spread > SPREAD_LIMITS.get(name, 1.0)
    )


def run_flops(
    bench: Microbench, compiler: Compiler, threads: int, repeats: int = FLOPS_REPEATS
) -> dict[str, Any]:
    return run(build(bench, compiler), threads, FLOPS_ITERATIONS, repeats)


def run_triad(
    compiler: Compiler, threads: int, n: int, repeats: int = TRIAD_REPEATS
) -> dict[str, Any]:
    """triad.c's JSON line: ``bandwidth`` (the best), ``pattern`` (which) and ``patterns``."""
    return run(build(TRIAD, compiler), threads, n, repeats)


def _when(threads: int) -> str:
    return f"{threads} threads, {datetime.date.today().isoformat()}"


def flops_figure(bench: Microbench, compiler: Compiler, threads: int, repeats: int) -> Figure:
    out = run_flops(bench, compiler, threads, repeats)
    chains = f"{int(out['chains'])} chains of {int(out['vector_bits'])}-bit vectors"
    if bench is FMA:
        what = f"FMA micro-benchmark flops.c ({chains}, 2 FLOP per lane per FMA)"
    else:
        what = (
            f"multiply+add micro-benchmark flops.c -ffp-contract=off ({chains}, "
            "1 FLOP per lane per instruction)"
        )
    spread_ = spread(out["rate"], out["median"])
    best = f"best of {repeats} (spread {spread_:.0%})"
    return Figure(out["rate"], spread_, f"measured: {what}, {best}, {_when(threads)}")


def bandwidth_figure(compiler: Compiler, threads: int, repeats: int) -> Figure:
    n = triad_elements(llc_bytes())
    out = run_triad(compiler, threads, n, repeats)
    return Figure(out["bandwidth"], triad_spread(out), bandwidth_provenance(out, n, _when(threads)))


def triad_spread(out: dict[str, Any]) -> float:
    """The spread of the winning pattern's repeats."""
    best = out["patterns"][out["pattern"]]
    return spread(best["best"], best["median"])


def bandwidth_provenance(out: dict[str, Any], n: int, when: str) -> str:
    """Which pattern won, and every pattern's best GB/s."""
    patterns = out["patterns"]
    each = ", ".join(f"{name} {p['best'] / 1e9:.1f}" for name, p in patterns.items())
    top = out["pattern"]
    return (
        f"measured: best of {len(patterns)} read:write mixes in triad.c over arrays of "
        f"{n * 4 / 2**20:.0f} MiB: {top} ({PATTERNS.get(top, top)}), best of "
        f"{int(out['repeats'])} (spread {triad_spread(out):.0%}); every pattern, GB/s: {each}; "
        f"{when}"
    )


def llc_bytes() -> int | None:
    llc = llc_level_and_bytes()
    return llc[1] if llc else None


def _measurers(compiler: Compiler, threads: int, factor: int) -> dict[str, Callable[[], Figure]]:
    return {
        "matmul_rate": lambda: flops_figure(FMA, compiler, threads, factor * FLOPS_REPEATS),
        "vector_rate": lambda: flops_figure(VECTOR, compiler, threads, factor * FLOPS_REPEATS),
        "bandwidth": lambda: bandwidth_figure(compiler, threads, factor * TRIAD_REPEATS),
    }


def measure_figures(
    ceilings: Iterable[str] = CEILINGS,
    threads: int | None = None,
    compiler: Compiler | None = None,
    repeat_factor: int = 1,
) -> Measurement:
    """Measure some of this CPU's ceilings (``CEILINGS``) on ``threads`` threads (default: every
    CPU in this process's affinity mask), with the machine's load meanwhile; ``repeat_factor``
    times the usual repeats (more chances to catch the machine at its best)."""
    threads = threads or available_cpus()
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    compiler = compiler or find_compiler()
    measurers = _measurers(compiler, threads, repeat_factor)
    ceilings = tuple(ceilings)
    unknown = set(ceilings) - set(measurers)
    if unknown:
        raise ValueError(f"no micro-benchmark measures {sorted(unknown)}; known: {CEILINGS}")
    before = machine_load()
    figures = {name: measurers[name]() for name in ceilings}
    after = read_cpu_times()
    steal = steal_fraction(before.times, after) if before.times and after else before.steal
    load = Load(before.loadavg, before.running, before.cpus, steal, after)
    return Measurement(figures, load)


def measure_cpu(threads: int | None = None) -> HardwareSpec:
    """Measure this CPU's matmul and vector FLOP/s and its memory bandwidth on ``threads``
    threads (default: every CPU in this process's affinity mask). Takes a few seconds."""
    threads = threads or available_cpus()
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    compiler = find_compiler()
    isa = machine_isa(compiler)
    levels = cache_levels()
    llc = last_level(levels)
    measured = measure_figures(CEILINGS, threads, compiler)
    figures = measured.figures
    return HardwareSpec(
        name=f"cpu:{cpu_model_name()}",
        backend="cpu",
        matmul_rate=figures["matmul_rate"].value,
        vector_rate=figures["vector_rate"].value,
        bandwidth=figures["bandwidth"].value,
        cores=threads,
        llc_bytes=llc[1] if llc else None,
        **machine_facts(isa, levels),
        provisional=measured.provisional,
        spread={name: figure.spread for name, figure in figures.items()},
        provenance={
            **{name: figure.provenance for name, figure in figures.items()},
            **_provenance(levels),
            "load": measured.describe(),
            **facts_provenance(isa, compiler, levels),
        },
    )


def machine_isa(compiler: Compiler) -> Isa:
    """The ISA kernels are compiled for; a target the compiler rejects is the user's to fix."""
    try:
        return detect_isa(compiler)
    except ValueError as exc:
        target = settings.cpu_target()
        if target is None or not _preprocesses(compiler):  # the compiler, not the target
            raise no_compiler(str(exc)) from exc
        raise UserError(
            f"the C compiler rejects ACCELOPT_CPU_TARGET={target!r} ({exc}): set it to a CPU "
            "the compiler knows (e.g. x86-64-v3, neoverse-n1) or unset it"
        ) from exc


def _preprocesses(compiler: Compiler) -> bool:
    """Whether the compiler works at all without a CPU target."""
    try:
        isa_from_compiler(compiler, ())
    except ValueError:
        return False
    return True


def _sharing(cache: CacheLevel) -> str:
    return "one per core" if cache.shared_by <= 1 else f"shared by {cache.shared_by} CPUs"


def machine_facts(isa: Isa, levels: list[CacheLevel]) -> dict[str, object]:
    """The HardwareSpec fields that describe the machine rather than measure it."""
    l1d, l2 = data_cache(levels, 1), data_cache(levels, 2)
    return {
        "arch": isa.arch,
        "isa": isa.features,
        "vector_bits": isa.vector_bits or None,
        "l1d_bytes": l1d.size_bytes if l1d else None,
        "l2_bytes": l2.size_bytes if l2 else None,
    }


def facts_provenance(isa: Isa, compiler: Compiler, levels: list[CacheLevel]) -> dict[str, str]:
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


def _provenance(levels: list[CacheLevel]) -> dict[str, str]:
    provenance = {"cores": f"OpenMP threads used ({available_cpus()} CPUs in the affinity mask)"}
    llc = last_level(levels)
    if llc is not None:
        shared = data_cache(levels, llc[0])
        sharing = f", {_sharing(shared)}" if shared else ""
        provenance["llc_bytes"] = f"sysfs: {CACHE_SYSFS}, level-{llc[0]} unified cache{sharing}"
    return provenance
