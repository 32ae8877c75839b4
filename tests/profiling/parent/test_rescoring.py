"""Re-scoring an evaluation against a raised spec of its device (``profiling/parent/rescoring``):
evaluations built by ``scoring.build_evaluation`` from fixed worker results, no worker."""

from __future__ import annotations

import math

import pytest
from evaluations import changed, flat
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import Problem, load_problem
from accelopt.profiling.composite import combine
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.rescoring import (
    CACHED_MARK,
    beats_the_roofline,
    cached_peak,
    ceiling_notes,
    lowers_a_ceiling,
    rescore,
    rescore_all,
)
from accelopt.profiling.parent.scoring import build_evaluation, workload_roofline
from accelopt.profiling.worker.protocol import KernelResult

ADAMW = load_problem("adamw")
SILU = load_problem("silu")
WORKLOAD = "cpu"
# memory-bound: the FLOP rates far above what the problems need
LOW = make_spec(name="cpu:rescore", matmul_rate=1e15, vector_rate=1e15, bandwidth=26e9)
RAISED = LOW.model_copy(update={"bandwidth": 46e9})


def kernel(problem: Problem, kind: str = "baseline") -> Kernel:
    return Kernel(shipped_kernel(problem, kind, "cpu").read_text(), "cpu", kind)


def peak(problem: Problem, hardware: HardwareSpec, workload: str = WORKLOAD) -> float:
    return workload_roofline(problem, workload, hardware).peak_s


def timed(
    pct: float,
    hardware: HardwareSpec = LOW,
    problem: Problem = ADAMW,
    kind: str = "baseline",
    workload: str = WORKLOAD,
) -> Evaluation:
    """An evaluation that reached ``pct`` of ``hardware``'s roofline, known to ±1 %."""
    latency = peak(problem, hardware, workload) / pct
    result = KernelResult(latency_s=latency, min_s=latency, calls=20,
                          ci_low_s=latency * 0.99, ci_high_s=latency * 1.01)  # fmt: skip
    return build_evaluation((kernel(problem, kind), problem, workload), hardware, 2, result)


def calibrated(evaluation: Evaluation, rate: float = 30e9) -> Evaluation:
    """``evaluation`` as ``scoring.figures`` makes it where a control was timed with it."""
    cost = ADAMW.cost.at(ADAMW.workload(evaluation.workload).sizes)
    peak_s = cost.bytes / rate
    latency = evaluation.latency_s
    assert latency is not None and evaluation.ci_low_s and evaluation.ci_high_s
    low, high = peak_s / evaluation.ci_high_s, peak_s / evaluation.ci_low_s
    return changed(
        evaluation, ceiling="calibrated", peak_s=peak_s, pct_of_peak=peak_s / latency,
        pct_low=low, pct_high=high, calibrated_peak_s=peak_s, calibrated_pct=peak_s / latency,
        calibrated_low=low, calibrated_high=high, control_rate=rate,
        control=f"memory 1:1: {rate / 1e9:.1f} GB/s while timed",
    )  # fmt: skip


def test_a_cached_row_gets_every_figure_against_the_new_ceiling():
    before = timed(0.68)
    after = rescore(before, ADAMW, RAISED)
    assert after.hardware == RAISED.key() != before.hardware
    assert after.status is Status.PASSED and after.error == ""
    assert after.ceiling == "cached"
    assert after.peak_s == flat(after, "cached_peak_s") == pytest.approx(peak(ADAMW, RAISED))
    assert after.latency_s == before.latency_s  # the measurement is the measurement
    assert after.pct_of_peak == flat(after, "cached_pct") == pytest.approx(0.68 * 26 / 46)
    assert after.pct_of_peak == after.peak_s / after.latency_s  # the invariant
    assert after.ci_high_s and after.ci_low_s
    assert after.pct_low == pytest.approx(after.peak_s / after.ci_high_s)
    assert after.pct_high == pytest.approx(after.peak_s / after.ci_low_s)
    # exactly what scoring the same result against the raised spec gives
    direct = timed(0.68 * 26 / 46, RAISED)
    for field in ("peak_s", "pct_of_peak", "cached_peak_s", "cached_pct", "pct_low", "pct_high"):
        assert flat(after, field) == pytest.approx(flat(direct, field)), field


def test_a_calibrated_row_keeps_its_headline_and_gets_the_cached_figures():
    before = calibrated(timed(0.68))
    after = rescore(before, ADAMW, RAISED)
    assert after.hardware == RAISED.key()
    assert after.ceiling == "calibrated"
    for field in ("peak_s", "pct_of_peak", "pct_low", "pct_high", "control_rate", "control"):
        assert flat(after, field) == flat(before, field), field
    assert flat(after, "cached_peak_s") == pytest.approx(peak(ADAMW, RAISED))
    assert flat(after, "cached_pct") == pytest.approx(0.68 * 26 / 46)
    assert after.pct_of_peak == pytest.approx(after.peak_s / (after.latency_s or math.nan))


def test_suspicious_only_for_beating_the_old_roofline_passes_against_the_raised_one():
    before = timed(0.68 * 1.73)  # the expert, 1.73x faster than a baseline at 68 %
    assert before.status is Status.SUSPICIOUS and beats_the_roofline(before)
    noted = before.model_copy(update={"error": f"{before.error} (the bandwidth ceiling was "
                                               "re-measured and raised to 30.0 GB/s)"})  # fmt: skip
    for evaluation in (before, noted):
        after = rescore(evaluation, ADAMW, RAISED)
        assert after.status is Status.PASSED and after.error == ""
        assert after.pct_of_peak == pytest.approx(0.68 * 1.73 * 26 / 46)


def test_suspicious_above_the_raised_roofline_too_stays_and_says_the_new_figure():
    before = timed(2.0)
    before = before.model_copy(update={"error": f"{before.error} (re-measured: raised)"})
    after = rescore(before, ADAMW, RAISED)
    assert after.status is Status.SUSPICIOUS
    assert after.error.startswith(f"{2.0 * 26 / 46:.0%} of peak is above the 105%")
    assert after.error.endswith(" (re-measured: raised)")
    assert after.pct_of_peak == pytest.approx(2.0 * 26 / 46)


def test_a_kernel_the_worker_caught_stays_suspicious():
    caught = changed(
        timed(0.5), status=Status.SUSPICIOUS, pct_of_peak=None, cached_pct=None,
        error="clearly faster on inputs changed in a few places",
    )  # fmt: skip
    assert not beats_the_roofline(caught)
    after = rescore(caught, ADAMW, RAISED)
    assert after.status is Status.SUSPICIOUS and after.error == caught.error
    assert after.hardware == RAISED.key() and after.pct_of_peak is None


def test_a_passed_row_stays_passed():
    after = rescore(timed(1.04), ADAMW, RAISED)
    assert after.status is Status.PASSED and after.error == ""


@pytest.mark.parametrize("status", [Status.INCORRECT, Status.COMPILE_ERROR, Status.TIMEOUT])
def test_a_failure_gets_only_the_new_key_and_cached_roofline(status: Status):
    result = KernelResult(status=status, error="wrong values at [3]")
    job = (kernel(ADAMW), ADAMW, WORKLOAD)
    before = build_evaluation(job, LOW, 2, result)
    after = rescore(before, ADAMW, RAISED)
    assert after.hardware == RAISED.key()
    assert flat(after, "cached_peak_s") == after.peak_s == pytest.approx(peak(ADAMW, RAISED))
    assert (after.status, after.error) == (status, "wrong values at [3]")
    assert after.latency_s is after.pct_of_peak is flat(after, "cached_pct") is None


def test_an_evaluation_against_the_spec_already_is_unchanged():
    evaluation = timed(0.5, RAISED)
    assert rescore(evaluation, ADAMW, RAISED) is evaluation


def test_another_problem_or_device_is_refused():
    with pytest.raises(ValueError, match="re-scored as silu"):
        rescore(timed(0.5), SILU, RAISED)
    other = make_spec(name="cpu:elsewhere", bandwidth=46e9)
    with pytest.raises(ValueError, match="another device"):
        rescore(timed(0.5), ADAMW, other)


def test_a_combined_evaluation_gets_the_geomean_of_its_workloads_rooflines():
    parts = [timed(0.5, workload="cpu"), timed(0.6, workload="small")]
    combined = combine(parts)
    after = rescore(combined, ADAMW, RAISED)
    expected = math.sqrt(peak(ADAMW, RAISED, "cpu") * peak(ADAMW, RAISED, "small"))
    assert flat(after, "cached_peak_s") == after.peak_s == pytest.approx(expected)
    assert after.pct_of_peak == pytest.approx(math.sqrt(0.5 * 0.6) * 26 / 46)
    # the same as combining the parts re-scored one by one
    again = combine([rescore(e, ADAMW, RAISED) for e in parts])
    assert after.pct_of_peak == pytest.approx(again.pct_of_peak)


def test_rescore_all_keeps_the_order_and_needs_every_problem():
    evaluations = [timed(0.5), timed(0.4, problem=SILU), calibrated(timed(0.3))]
    rescored = rescore_all(evaluations, {"adamw": ADAMW, "silu": SILU}, RAISED)
    assert [e.problem for e in rescored] == ["adamw", "silu", "adamw"]
    assert {e.hardware for e in rescored} == {RAISED.key()}
    assert not lowers_a_ceiling(evaluations, rescored)
    assert lowers_a_ceiling(rescored, rescore_all(rescored, {"adamw": ADAMW, "silu": SILU}, LOW))
    with pytest.raises(KeyError):
        rescore_all(evaluations, {"adamw": ADAMW}, RAISED)


def test_ceiling_notes_say_what_the_figures_are_against():
    rows = [timed(0.5, RAISED), calibrated(timed(0.4, RAISED))]
    first, second = ceiling_notes(rows, RAISED)
    assert "calibrated against a control timed with each kernel" in first
    assert f"{CACHED_MARK} against the cached ceiling" in first
    assert "cpu:rescore" in second and "bandwidth 46.0 GB/s" in second
    only_cached = ceiling_notes(rows[:1], None)
    assert len(only_cached) == 1 and "calibrated" not in only_cached[0]
    assert cached_peak(rows[1]) == flat(rows[1], "cached_peak_s") != rows[1].peak_s
