"""Ceilings measured in rounds spaced in time, with a control at the end: fake micro-benchmark
runs (no real run), a fake clock and pause, a quiet machine."""

from dataclasses import dataclass, field

import pytest

from accelopt.hardware import measure
from accelopt.hardware.figures import AGREEMENT_LIMITS
from accelopt.hardware.load import Load
from accelopt.hardware.measure import (
    CEILINGS,
    FLOPS_REPEATS,
    ROUND_ORDER,
    ROUND_PAUSE_S,
    ROUNDS,
    TRIAD_REPEATS,
    Compiler,
    measure_figures,
)
from accelopt.hardware.spec import Confidence

COMPILER = Compiler(("cc",), "fakecc 1.0")
RUN_S = 0.25  # how long each fake run takes on the fake clock
QUIET = Load(loadavg=0.1, running=1, cpus=2, steal=0.0)
STEADY = {"matmul_rate": [2.65e11], "vector_rate": [1.32e11], "bandwidth": [4.6e10]}


@dataclass
class Bench:
    """The fake micro-benchmarks: each ceiling's best figure per run, in the order run (the last
    repeats once they run out); every run and pause logged, the clock advanced by both."""

    figures: dict[str, list[float]] = field(default_factory=lambda: dict(STEADY))
    now: float = 0.0
    log: list[str] = field(default_factory=list)
    repeats: dict[str, list[int]] = field(default_factory=dict)

    def take(self, ceiling: str, repeats: int) -> float:
        self.repeats.setdefault(ceiling, []).append(repeats)
        done = self.log.count(ceiling)
        self.log.append(ceiling)
        self.now += RUN_S
        values = self.figures[ceiling]
        return values[min(done, len(values) - 1)]

    def run_flops(self, bench, compiler, threads, repeats):
        rate = self.take("matmul_rate" if bench is measure.FMA else "vector_rate", repeats)
        flops = {"rate": rate, "median": 0.99 * rate, "worst": 0.98 * rate, "repeats": repeats}
        return {**flops, "chains": 12, "vector_bits": 256}

    def run_triad(self, compiler, threads, n, repeats):
        best = self.take("bandwidth", repeats)
        patterns = {
            "read": {"best": 0.9 * best, "median": 0.88 * best, "worst": 0.8 * best},
            "triad_nt": {"best": best, "median": 0.97 * best, "worst": 0.95 * best},
        }
        winner = {"bandwidth": best, "pattern": "triad_nt", "patterns": patterns}
        return {**winner, "repeats": repeats, "n": n}

    def pause(self, seconds: float) -> None:
        self.log.append(f"pause {seconds}")
        self.now += seconds


@pytest.fixture
def bench(monkeypatch) -> Bench:
    fake = Bench()
    monkeypatch.setattr(measure, "run_flops", fake.run_flops)
    monkeypatch.setattr(measure, "run_triad", fake.run_triad)
    monkeypatch.setattr(measure, "clock", lambda: fake.now)
    monkeypatch.setattr(measure, "pause", fake.pause)
    monkeypatch.setattr(measure, "machine_load", lambda: QUIET)
    monkeypatch.setattr(measure, "read_cpu_times", lambda: None)
    monkeypatch.setattr(measure, "llc_bytes", lambda: None)
    return fake


def _measure(**kwargs):
    return measure_figures(CEILINGS, threads=2, compiler=COMPILER, **kwargs)


def test_rounds_are_interleaved_spaced_and_end_with_a_control(bench):
    _measure()
    one_round = list(ROUND_ORDER)
    pause = f"pause {ROUND_PAUSE_S}"
    expected = [*one_round, pause, *one_round, pause, *one_round, pause, "bandwidth"]
    assert ROUNDS == 3 and bench.log == expected
    assert bench.repeats["matmul_rate"] == [FLOPS_REPEATS] * ROUNDS
    assert bench.repeats["bandwidth"] == [TRIAD_REPEATS] * (ROUNDS + 1)


def test_the_repeat_factor_lengthens_each_run_not_the_rounds(bench):
    _measure(repeat_factor=2)
    assert bench.repeats["vector_rate"] == [2 * FLOPS_REPEATS] * ROUNDS
    assert bench.log.count("bandwidth") == ROUNDS + 1


def test_every_ceiling_is_in_a_round_and_the_control_brackets_bandwidth():
    assert sorted(ROUND_ORDER) == sorted(CEILINGS)
    assert ROUND_ORDER[0] == "bandwidth"  # the one neither the load average nor steal shows


def test_one_ceiling_alone_is_measured_in_rounds_too(bench):
    measured = measure_figures(["matmul_rate"], threads=2, compiler=COMPILER)
    assert bench.log.count("matmul_rate") == ROUNDS + 1  # its own control
    assert set(measured.figures) == {"matmul_rate"}
    assert measured.rounds["matmul_rate"].control


def test_no_ceiling_runs_nothing(bench):
    measured = measure_figures([], threads=2, compiler=COMPILER)
    assert measured.figures == {} and bench.log == [] and not measured.provisional


def test_rounds_that_agree_are_sure(bench):
    bench.figures = {
        "matmul_rate": [2.64e11, 2.65e11, 2.63e11],
        "vector_rate": [1.32e11],
        "bandwidth": [4.55e10, 4.62e10, 4.50e10, 4.58e10],
    }
    measured = _measure()
    assert not measured.provisional, measured.reasons
    assert measured.figures["matmul_rate"].value == 2.65e11  # the best round
    assert measured.figures["bandwidth"].value == 4.62e10
    assert {f.confidence for f in measured.figures.values()} == {Confidence.SURE}
    assert measured.figures["bandwidth"].disagreement == pytest.approx(0.12e10 / 4.62e10)
    assert measured.figures["vector_rate"].disagreement == 0.0
    assert measured.describe().startswith("quiet during the measurement")


def test_a_neighbour_present_for_part_of_the_measurement_makes_it_provisional(bench):
    bench.figures = {**STEADY, "bandwidth": [26.1e9, 44.0e9, 46.2e9, 45.8e9]}
    measured = _measure()
    bandwidth = measured.figures["bandwidth"]
    assert bandwidth.value == 46.2e9  # a ceiling: the best round, not the mean
    assert bandwidth.confidence is Confidence.UNSURE
    assert bandwidth.disagreement == pytest.approx((46.2 - 26.1) / 46.2)
    assert measured.figures["matmul_rate"].confidence is Confidence.SURE
    assert measured.provisional
    (reason,) = measured.reasons
    span = ROUNDS * len(ROUND_ORDER) * RUN_S + ROUNDS * ROUND_PAUSE_S  # first run to control
    assert reason.startswith(
        f"bandwidth: 3 rounds and a control over {span:.1f} s gave 26.1, 44.0, 46.2 and 45.8 "
        "GB/s: they differ by 44% (a quiet machine's agree within 15%)"
    )
    assert "a neighbour's load the load average does not show" in reason
    assert "provisional" in measured.describe() and reason in measured.describe()


def test_a_control_that_disagrees_makes_it_provisional(bench):
    bench.figures = {**STEADY, "bandwidth": [46.0e9, 46.2e9, 45.9e9, 30.0e9]}  # a neighbour came
    measured = _measure()
    assert measured.provisional
    assert measured.figures["bandwidth"].value == 46.2e9
    assert measured.figures["bandwidth"].confidence is Confidence.UNSURE
    assert "and 30.0 GB/s" in measured.reasons[0]


@pytest.mark.parametrize(
    ("rates", "sure"),
    [([2.65e11, 2.60e11, 2.64e11], True), ([2.65e11, 2.45e11, 2.64e11], False)],
    ids=["within-the-limit", "beyond-it"],
)
def test_flop_rounds_must_agree_more_closely_than_bandwidth_rounds(bench, rates, sure):
    bench.figures = {**STEADY, "matmul_rate": rates}
    measured = _measure()
    assert AGREEMENT_LIMITS["matmul_rate"] < AGREEMENT_LIMITS["bandwidth"]
    assert measured.provisional is not sure
    expected = Confidence.SURE if sure else Confidence.UNSURE
    assert measured.figures["matmul_rate"].confidence is expected


def test_a_busy_machine_leaves_every_ceiling_unsure(bench, monkeypatch):
    monkeypatch.setattr(measure, "machine_load", lambda: Load(5.0, 6, 2, 0.0))
    measured = _measure()
    assert measured.provisional
    assert {f.confidence for f in measured.figures.values()} == {Confidence.UNSURE}


def test_the_provenance_names_every_round(bench):
    bench.figures = {**STEADY, "matmul_rate": [2.60e11, 2.65e11, 2.62e11]}
    text = _measure().figures["matmul_rate"].provenance
    assert text.startswith("measured: FMA micro-benchmark flops.c (12 chains of 256-bit vectors")
    assert "best of 3 (spread 1%)" in text
    assert "the best of 3 rounds over " in text
    assert "gave 260.0, 265.0 and 262.0 GFLOP/s (they differ by 2%); 2 threads, " in text


# -- progress: a first measurement can take minutes ------------------------------------------------


def test_every_run_is_a_whole_progress_line_on_stderr(bench, capsys):
    """stderr is not a terminal here: each step is a line of its own, ended at once."""
    bench.figures = {**STEADY, "bandwidth": [26.1e9, 44.0e9, 46.2e9, 45.8e9]}
    _measure()
    err = capsys.readouterr().err
    assert err.endswith("\n") and "\r" not in err
    lines = err.splitlines()
    assert (
        lines[0]
        == "ceilings: measuring bandwidth, matmul, vector: 3 rounds and a control on 2 threads"
    )
    steps = lines[1:]
    assert len(steps) == ROUNDS * len(ROUND_ORDER) + 1  # every run, the control included
    assert steps[0].startswith("ceilings: round 1/3: bandwidth 26.1 GB/s (best so far 26.1 GB/s) [")
    assert steps[3].startswith("ceilings: round 2/3: bandwidth 44.0 GB/s (best so far 44.0 GB/s)")
    assert steps[1].startswith("ceilings: round 1/3: matmul 265.0 GFLOP/s (best so far 265.0")
    assert steps[8].startswith("ceilings: round 3/3: vector 132.0 GFLOP/s")
    assert steps[-1].startswith("ceilings: control: bandwidth 45.8 GB/s (best so far 46.2 GB/s)")
    assert all(line.endswith(" s]") for line in steps)


def test_each_line_is_out_before_the_next_run_starts(bench, capsys, monkeypatch):
    seen: list[int] = []  # the step lines out when each run starts
    out: list[str] = []
    flops = bench.run_flops

    def run_flops(*args):
        out.extend(capsys.readouterr().err.splitlines())
        seen.append(sum(": round " in line for line in out))
        return flops(*args)

    monkeypatch.setattr(measure, "run_flops", run_flops)
    _measure()
    assert seen == [1, 2, 4, 5, 7, 8]  # bandwidth, matmul, vector per round: all before it
