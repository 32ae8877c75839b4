"""Measure this CPU's ceilings on all its cores with three C micro-benchmarks.

- matmul_rate: ``microbench/flops.c`` built with ``-ffp-contract=fast``: independent FMA chains.
- vector_rate: the same source built with ``-ffp-contract=off``: a multiply then an add per update.
- bandwidth: ``microbench/triad.c``: the best of STREAM-style patterns covering the read:write mixes
  the suite's kernels have (read-only, 1:1, 2:1, 3:1 and 4:1, each with regular and with
  non-temporal stores) over arrays far larger than the LLC. A ceiling must be one no honest kernel
  beats: a kernel that mostly reads or streams its stores beats the plain triad.

Each is built once with the system C compiler (``-O3 -march=native -fopenmp``) into
``cache_dir()/microbench/``, keyed by source, flags, compiler version and CPU model, run with
OMP_NUM_THREADS threads, and reports the best, median and worst of a few repeats as one JSON line.

A measurement runs in ROUNDS rounds spaced ROUND_PAUSE_S apart, each running every ceiling's
micro-benchmark once, then a control: the round's first micro-benchmark once more at the end. A
neighbour's load that comes and goes over seconds (another VM on the memory bus, which the load
average cannot see) lowers some rounds and not others, while the repeats of one run, a fraction of
a second apart, can all fall inside it. The ceiling is the best of every run. How far the runs'
best figures disagree, the spread ``(best - median) / best`` of the best run's repeats, the
machine's load before the measurement (``hardware.load``) and the hypervisor's steal during it say
whether the machine was quiet: each ceiling is ``sure`` or ``unsure``, and a measurement with an
unsure ceiling is ``provisional``: measured again when the machine is quiet (``hardware.cache``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
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
from accelopt.hardware.spec import Confidence, HardwareSpec
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
# A measurement: ROUNDS rounds, ROUND_PAUSE_S apart, then the control. A round's runs take about a
# second, so rounds start 1-2 s apart. Fewer repeats per run than the single run of each ceiling
# had (5 and 6) keep the repeats about as many (9 and 8); the pauses and a process start per run
# add 2-3 s to the 3-4 s a measurement took on a 2-core VM.
ROUNDS = 3
ROUND_PAUSE_S = 0.5
FLOPS_REPEATS = 3  # per run, 9 in all: an odd count keeps the median the middle repeat
TRIAD_REPEATS = 2  # per run, 8 in all; each runs every pattern once: 5 GB moved at 128 MiB arrays
# The order of a round. Bandwidth first: the control, a rerun of the first, then brackets the
# whole measurement for the ceiling whose contention neither the load average nor steal shows.
ROUND_ORDER = ("bandwidth", "matmul_rate", "vector_rate")
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
# With TRIAD_REPEATS = 2, triad.c's median is the slower repeat: within the same limit.
SPREAD_LIMITS = {"matmul_rate": 0.10, "vector_rate": 0.10, "bandwidth": 0.30}
# Runs whose best figures differ by more than this, (max - min) / max, saw contention come and go.
# The bests, not the medians: each run's best is its quietest moment, so on a quiet machine runs
# agree at least as closely as a run's median stays below its best (SPREAD_LIMITS' figures): FLOP
# loops within 3 %, so 5 %; DRAM streams' repeats vary by up to 25 % (other guests' bursts on the
# memory bus), most of which a run's best skips, so 15 %. Contention seen on a shared VM, which
# each run's own spread did not show: 26.1 vs 46.2 GB/s (43 %), 167 vs 265 GFLOP/s (37 %), far
# above either limit.
AGREEMENT_LIMITS = {"matmul_rate": 0.05, "vector_rate": 0.05, "bandwidth": 0.15}

# The measurement's clock and its pause between rounds (tests replace them).
clock: Callable[[], float] = time.monotonic
pause: Callable[[float], None] = time.sleep


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
    """The flags kernels are built with (docs/architecture.md, Contracts), less those only a
    shared object needs."""
    return (OPT_FLAGS[0], *target_flags(compiler), *OPT_FLAGS[1:])


def sources_of(source: Path) -> bytes:
    """A micro-benchmark's source and the header the streaming ones share: what its build is
    keyed by (a changed header builds it again)."""
    return source.read_bytes() + (MICROBENCH_DIR / "vectors.h").read_bytes()


def build(bench: Microbench, compiler: Compiler) -> Path:
    """The executable of ``bench``, compiled once and kept under ``cache_dir()/microbench``."""
    source = MICROBENCH_DIR / bench.source
    flags = (*base_flags(compiler), *bench.flags)
    identity = "\n".join([*compiler.command, compiler.version, *flags, cpu_model_name()])
    digest = hashlib.sha256(sources_of(source) + identity.encode()).hexdigest()[:16]
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
    """One measured ceiling: its value, how much its repeats varied, where it came from, how far
    the runs of its measurement disagreed and how sure it is (None: not measured in rounds)."""

    value: float
    spread: float
    provenance: str
    disagreement: float | None = None
    confidence: Confidence | None = None


@dataclass(frozen=True)
class Sample:
    """One run of a ceiling's micro-benchmark: its best figure, its repeats' spread, what ran (for
    the provenance) and when it started, in seconds since the measurement began."""

    value: float
    spread: float
    detail: str
    at: float = 0.0


def disagreement(values: Iterable[float]) -> float:
    """How far runs disagree: ``(max - min) / max`` of their figures (0 when they agree)."""
    values = tuple(values)
    top = max(values, default=0.0)
    return (top - min(values)) / top if top > 0 else 0.0


def unit(ceiling: str) -> str:
    """The unit a ceiling is read in."""
    return "GB/s" if ceiling == "bandwidth" else "GFLOP/s"


@dataclass(frozen=True)
class Rounds:
    """One ceiling's runs in the order taken: one per round, then the control when this ceiling
    was the one run again at the end."""

    ceiling: str
    samples: tuple[Sample, ...]
    control: bool = False

    @property
    def best(self) -> Sample:
        return max(self.samples, key=lambda sample: sample.value)

    @property
    def disagreement(self) -> float:
        return disagreement(sample.value for sample in self.samples)

    @property
    def span_s(self) -> float:
        """Seconds from the first run's start to the last's."""
        return self.samples[-1].at - self.samples[0].at

    def describe(self) -> str:
        """E.g. ``3 rounds and a control over 4.6 s gave 26.1, 44.0, 46.2 and 45.8 GB/s``."""
        runs = len(self.samples) - self.control
        what = f"{runs} round{'s' if runs != 1 else ''}"
        what += " and a control" if self.control else ""
        values = [f"{sample.value / 1e9:.1f}" for sample in self.samples]
        listed = ", ".join(values[:-1]) + f" and {values[-1]}" if len(values) > 1 else values[0]
        return f"{what} over {self.span_s:.1f} s gave {listed} {unit(self.ceiling)}"


@dataclass(frozen=True)
class Measurement:
    """Some ceilings measured together, and how busy the machine was meanwhile: ``load`` is read
    before the micro-benchmarks ran (their own threads would count), its steal over them;
    ``rounds``, per ceiling, the runs its figure is the best of."""

    figures: dict[str, Figure]
    load: Load
    rounds: dict[str, Rounds] = dataclass_field(default_factory=dict)

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the figures are provisional; empty when the machine was quiet."""
        return self.load.reasons + spread_reasons(self.figures) + disagreement_reasons(self.rounds)

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


def disagreement_reasons(rounds: dict[str, Rounds]) -> tuple[str, ...]:
    """The ceilings whose runs, seconds apart, disagreed more than a quiet machine's do: a load
    that came and went during the measurement, which one run's repeats cannot show."""
    return tuple(
        f"{name}: {runs.describe()}: they differ by {runs.disagreement:.0%} (a quiet machine's "
        f"agree within {AGREEMENT_LIMITS[name]:.0%}): contention came and went, a neighbour's "
        "load the load average does not show"
        for name, runs in rounds.items()
        if runs.disagreement > AGREEMENT_LIMITS.get(name, 1.0)
    )


def judged(name: str, figure: Figure, load: Load) -> Figure:
    """``figure`` with its confidence: sure when nothing casts doubt on it (the machine quiet,
    its repeats steady, its runs in agreement), unsure otherwise."""
    doubted = (
        load.busy
        or figure.spread > SPREAD_LIMITS.get(name, 1.0)
        or (figure.disagreement or 0.0) > AGREEMENT_LIMITS.get(name, 1.0)
    )
    return replace(figure, confidence=Confidence.UNSURE if doubted else Confidence.SURE)


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


def flops_sample(bench: Microbench, compiler: Compiler, threads: int, repeats: int) -> Sample:
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
    return Sample(out["rate"], spread_, f"{what}, best of {repeats} (spread {spread_:.0%})")


def bandwidth_sample(compiler: Compiler, threads: int, n: int, repeats: int) -> Sample:
    out = run_triad(compiler, threads, n, repeats)
    return Sample(out["bandwidth"], triad_spread(out), bandwidth_provenance(out, n))


def triad_spread(out: dict[str, Any]) -> float:
    """The spread of the winning pattern's repeats."""
    best = out["patterns"][out["pattern"]]
    return spread(best["best"], best["median"])


def bandwidth_provenance(out: dict[str, Any], n: int) -> str:
    """Which pattern won, and every pattern's best GB/s."""
    patterns = out["patterns"]
    each = ", ".join(f"{name} {p['best'] / 1e9:.1f}" for name, p in patterns.items())
    top = out["pattern"]
    return (
        f"best of {len(patterns)} read:write mixes in triad.c over arrays of "
        f"{n * 4 / 2**20:.0f} MiB: {top} ({PATTERNS.get(top, top)}), best of "
        f"{int(out['repeats'])} (spread {triad_spread(out):.0%}); every pattern, GB/s: {each}"
    )


def llc_bytes() -> int | None:
    llc = llc_level_and_bytes()
    return llc[1] if llc else None


def _measurers(compiler: Compiler, threads: int, factor: int) -> dict[str, Callable[[], Sample]]:
    n = triad_elements(llc_bytes())
    return {
        "matmul_rate": lambda: flops_sample(FMA, compiler, threads, factor * FLOPS_REPEATS),
        "vector_rate": lambda: flops_sample(VECTOR, compiler, threads, factor * FLOPS_REPEATS),
        "bandwidth": lambda: bandwidth_sample(compiler, threads, n, factor * TRIAD_REPEATS),
    }


def take_rounds(
    measurers: dict[str, Callable[[], Sample]], rounds: int = ROUNDS
) -> dict[str, Rounds]:
    """Run every measurer once per round, in their order, the rounds ROUND_PAUSE_S apart, then
    the first once more (the control): interleaved and spaced, the ceilings' runs each see the
    machine at several moments, and the control, the last run, the same benchmark as the first."""
    if not measurers:
        return {}
    start = clock()
    taken: dict[str, list[Sample]] = {name: [] for name in measurers}

    def take(name: str) -> None:
        at = clock() - start
        taken[name].append(replace(measurers[name](), at=at))

    for index in range(rounds):
        if index:
            pause(ROUND_PAUSE_S)
        for name in measurers:
            take(name)
    first = next(iter(measurers))
    pause(ROUND_PAUSE_S)
    take(first)
    return {name: Rounds(name, tuple(runs), name == first) for name, runs in taken.items()}


def round_figure(rounds: Rounds, threads: int) -> Figure:
    """The best of a ceiling's runs, its provenance naming every run's figure."""
    best = rounds.best
    runs = f"the best of {rounds.describe()} (they differ by {rounds.disagreement:.0%})"
    provenance = f"measured: {best.detail}; {runs}; {_when(threads)}"
    return Figure(best.value, best.spread, provenance, rounds.disagreement)


def measure_figures(
    ceilings: Iterable[str] = CEILINGS,
    threads: int | None = None,
    compiler: Compiler | None = None,
    repeat_factor: int = 1,
) -> Measurement:
    """Measure some of this CPU's ceilings (``CEILINGS``) on ``threads`` threads (default: every
    CPU in this process's affinity mask) in rounds (``take_rounds``), with the machine's load
    meanwhile; ``repeat_factor`` times the usual repeats per run (more chances to catch the
    machine at its best)."""
    threads = threads or available_cpus()
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    ceilings = tuple(dict.fromkeys(ceilings))
    unknown = set(ceilings) - set(CEILINGS)
    if unknown:
        raise ValueError(f"no micro-benchmark measures {sorted(unknown)}; known: {CEILINGS}")
    measurers = _measurers(compiler or find_compiler(), threads, repeat_factor)
    before = machine_load()
    rounds = take_rounds({name: measurers[name] for name in ROUND_ORDER if name in ceilings})
    load = _load_since(before)
    figures = {name: judged(name, round_figure(rounds[name], threads), load) for name in ceilings}
    return Measurement(figures, load, rounds)


def _load_since(before: Load) -> Load:
    """The load read before the measurement, with the steal over it."""
    after = read_cpu_times()
    steal = steal_fraction(before.times, after) if before.times and after else before.steal
    return Load(before.loadavg, before.running, before.cpus, steal, after)


def measure_cpu(threads: int | None = None) -> HardwareSpec:
    """Measure this CPU's matmul and vector FLOP/s and its memory bandwidth on ``threads``
    threads (default: every CPU in this process's affinity mask). Takes several seconds."""
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
        **judgement(figures),
        provenance={
            **{name: figure.provenance for name, figure in figures.items()},
            **_provenance(levels),
            "load": measured.describe(),
            **facts_provenance(isa, compiler, levels),
        },
    )


def judgement(figures: dict[str, Figure]) -> dict[str, object]:
    """The HardwareSpec fields that say how far each figure can be trusted."""
    return {
        "spread": {name: figure.spread for name, figure in figures.items()},
        "disagreement": {
            name: figure.disagreement
            for name, figure in figures.items()
            if figure.disagreement is not None
        },
        "confidence": {
            name: figure.confidence
            for name, figure in figures.items()
            if figure.confidence is not None
        },
    }


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
