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
a second apart, can all fall inside it. The ceiling is the best of every run; how far the runs
agree, how steady their repeats were and how busy the machine was say how sure it is
(``hardware.figures``). ``hardware.cpu_spec`` makes this CPU's spec of the figures.

Each build and each run is a line on stderr as it ends (``hardware.notices.progress``): what ran,
round i/n, its figure and the best so far, the seconds since the measurement began.
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
from pathlib import Path
from typing import Any

import accelopt.hardware.notices as notices
from accelopt import settings
from accelopt.hardware.cpuinfo import available_cpus, cpu_model_name, llc_level_and_bytes
from accelopt.hardware.figures import (
    CEILINGS,
    Figure,
    Measurement,
    Rounds,
    Sample,
    in_units,
    judged,
    label,
    spread,
)
from accelopt.hardware.load import Load, machine_load, read_cpu_times, steal_fraction
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
    notices.progress(f"building the {bench.name} micro-benchmark ({source.name}, once)")
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
    machine at several moments, and the control, the last run, the same benchmark as the first.
    Each run is a progress line on stderr (``notices.progress``): the step, its figure, the best
    so far."""
    if not measurers:
        return {}
    start = clock()
    taken: dict[str, list[Sample]] = {name: [] for name in measurers}

    def take(name: str, step: str) -> None:
        at = clock() - start
        taken[name].append(replace(measurers[name](), at=at))
        notices.progress(step_line(step, name, taken[name], clock() - start))

    for index in range(rounds):
        if index:
            pause(ROUND_PAUSE_S)
        for name in measurers:
            take(name, f"round {index + 1}/{rounds}")
    first = next(iter(measurers))
    pause(ROUND_PAUSE_S)
    take(first, "control")
    return {name: Rounds(name, tuple(runs), name == first) for name, runs in taken.items()}


def step_line(step: str, ceiling: str, samples: list[Sample], elapsed_s: float) -> str:
    """``round 2/3: bandwidth 44.0 GB/s (best so far 46.2 GB/s) [5.1 s]``."""
    latest = in_units(ceiling, samples[-1].value)
    best = in_units(ceiling, max(sample.value for sample in samples))
    return f"{step}: {label(ceiling)} {latest} (best so far {best}) [{elapsed_s:.1f} s]"


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
    order = [name for name in ROUND_ORDER if name in ceilings]
    if order:
        names = ", ".join(label(name) for name in order)
        notices.progress(f"measuring {names}: {ROUNDS} rounds and a control on {threads} threads")
    before = machine_load()
    rounds = take_rounds({name: measurers[name] for name in order})
    load = _load_since(before)
    figures = {name: judged(name, round_figure(rounds[name], threads), load) for name in ceilings}
    return Measurement(figures, load, rounds)


def _load_since(before: Load) -> Load:
    """The load read before the measurement, with the steal over it."""
    after = read_cpu_times()
    steal = steal_fraction(before.times, after) if before.times and after else before.steal
    return Load(before.loadavg, before.running, before.cpus, steal, after)
