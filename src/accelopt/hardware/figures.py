"""What a measurement of ceilings found, and how far each figure can be trusted.

A ceiling is the best of its runs (``hardware.measure``). How far the runs' best figures disagree,
the spread ``(best - median) / best`` of the best run's repeats, the machine's load before the
measurement (``hardware.load``) and the hypervisor's steal during it say whether the machine was
quiet: each ceiling is ``sure`` or ``unsure``, and a measurement with an unsure ceiling is
``provisional``: measured again when the machine is quiet (``hardware.cache``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field

from accelopt.hardware.load import Load, describe_figures, verdict
from accelopt.hardware.spec import Confidence

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


def spread(best: float, median: float) -> float:
    """How much repeats varied: ``(best - median) / best`` (0 when they agree)."""
    return max(0.0, (best - median) / best) if best > 0 else 0.0


def unit(ceiling: str) -> str:
    """The unit a ceiling is read in."""
    return "GB/s" if ceiling == "bandwidth" else "GFLOP/s"


# The ceilings a CPU measurement gives (``hardware.measure``), in the order they are shown.
CEILINGS = ("matmul_rate", "vector_rate", "bandwidth")
# What each ceiling is called in a line a person reads.
LABELS = {"matmul_rate": "matmul", "vector_rate": "vector", "bandwidth": "bandwidth"}


def label(ceiling: str) -> str:
    return LABELS.get(ceiling, ceiling)


def in_units(ceiling: str, value: float) -> str:
    """A ceiling's figure in the units people read: ``50.0 GB/s``, ``246.7 GFLOP/s``."""
    return f"{value / 1e9:,.1f} {unit(ceiling)}"


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

    @property
    def doubts(self) -> tuple[str, ...]:
        """``reasons`` in a few words, one per doubtful ceiling (its rounds apart, else its
        repeats' spread), then the load's: 'bandwidth rounds 44% apart'."""
        seen = []
        for name, figure in self.figures.items():
            runs = self.rounds.get(name)
            if runs is not None and runs.disagreement > AGREEMENT_LIMITS.get(name, 1.0):
                seen.append(f"{label(name)} rounds {runs.disagreement:.0%} apart")
            elif figure.spread > SPREAD_LIMITS.get(name, 1.0):
                seen.append(f"{label(name)} repeats spread {figure.spread:.0%}")
        return (*seen, *self.load.reasons)

    def describe(self) -> str:
        """The ``load`` provenance line: quiet, or provisional and why."""
        return verdict(
            self.reasons,
            "provisional, measured while the machine was busy",
            f"quiet during the measurement ({describe_figures(self.load)})",
        )


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
