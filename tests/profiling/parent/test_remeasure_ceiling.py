"""Ceilings are ceilings: a kernel that beats a cached ceiling has that ceiling re-measured before
it is called SUSPICIOUS (the re-measurement is faked here: it returns the figure a test chooses).

Real kernels run through real Evaluators against a bandwidth ceiling a third of what the kernel
itself reached (as a measurement on a busy machine comes out), so that an honest run beats it by
far, though not by the margin only a replay reaches. Where only the bookkeeping is under test, the
worker's result is a fixed one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from parallel_eval import evaluate_in_parallel
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.hardware import cache as hw_cache
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import Problem, load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.evaluator import Evaluator
from accelopt.profiling.worker.protocol import EvaluationAnswer, KernelResult

CONFIG = EvalConfig(seeds=1, seed=7, min_calls=5, min_time_s=0, workers=2)
WORKLOAD = "cpu"  # milliseconds of work a call: the median is the kernel's, not the machine's noise
BUSY_FACTOR = 3.0  # how far below the truth the cached ceiling is

# What a worker reports for an honest silu [cpu] run: 58.7 MB in 3 ms (19.6 GB/s).
HONEST = EvaluationAnswer(result=KernelResult(latency_s=3e-3, calls=5, min_s=3e-3))
HONEST_RATE = 8 * 2048 * 3584 / 3e-3


def low_bandwidth(bandwidth: float) -> HardwareSpec:
    """Ceilings measured on a busy machine: the bandwidth too low; the FLOP rates high, so silu
    stays memory-bound."""
    return make_spec(
        name="cpu:too-low",
        matmul_rate=1e15,
        vector_rate=1e15,
        bandwidth=bandwidth,
        provenance={"bandwidth": "measured: while the machine was busy"},
    )


class FakeRemeasure:
    """Stands for ``hardware.cache.raise_ceiling``: records its calls, raises to ``value``."""

    def __init__(self, value: float) -> None:
        self.value = value
        self.calls: list[tuple[str, str]] = []

    def __call__(self, spec: HardwareSpec, ceiling: str, why: str) -> HardwareSpec:
        self.calls.append((ceiling, why))
        value = max(self.value, getattr(spec, ceiling))
        provenance = {**spec.provenance, ceiling: f"raised by a re-measurement ({why})"}
        return spec.model_copy(update={ceiling: value, "provenance": provenance})


@pytest.fixture(scope="module")
def silu() -> Problem:
    return load_problem("silu")


@pytest.fixture(scope="module")
def kernels(silu: Problem, kernel_file: Callable[[str], Kernel]) -> list[Kernel]:
    baseline = Kernel(shipped_kernel(silu, "baseline").read_text(), "cpu", "baseline")
    return [baseline, kernel_file("correct_sigmoid")]


@pytest.fixture(scope="module")
def reached(accelopt_cache, hw: HardwareSpec, silu: Problem, kernels: list[Kernel]) -> float:
    """The bandwidth the baseline reaches here, in bytes/s (against realistic ceilings)."""
    with Evaluator(hw, CONFIG) as evaluator:
        evaluation = evaluator.evaluate(kernels[0], silu, WORKLOAD)
    assert evaluation.status is Status.PASSED, evaluation.error
    assert evaluation.latency_s is not None
    return silu.cost.at(silu.workload(WORKLOAD).sizes).bytes / evaluation.latency_s


@pytest.fixture
def evaluator(reached: float) -> Iterator[Evaluator]:
    with Evaluator(low_bandwidth(reached / BUSY_FACTOR), CONFIG) as ev:
        yield ev


@pytest.fixture
def stubbed(accelopt_cache) -> Iterator[Evaluator]:
    """An evaluator whose pool answers HONEST without running anything."""
    with Evaluator(low_bandwidth(HONEST_RATE / BUSY_FACTOR), CONFIG) as ev:
        ev.pool.ask = lambda request, deadlines, cap: HONEST.model_copy(deep=True)  # type: ignore[method-assign]
        yield ev


@pytest.mark.alone  # a figure: the kernels must reach above the too-low ceiling
def test_an_honest_kernel_above_a_too_low_ceiling_passes_after_a_remeasurement(
    evaluator: Evaluator, silu: Problem, kernels: list[Kernel]
):
    low = evaluator.hardware
    evaluator.remeasure = remeasure = FakeRemeasure(1e15)
    first, second = evaluate_in_parallel(evaluator, [(k, silu, WORKLOAD) for k in kernels])
    assert first.status is Status.PASSED, first.error
    assert second.status is Status.PASSED, second.error
    assert [c for c, _ in remeasure.calls] == ["bandwidth"]  # once, though both ran at once
    assert "silu [cpu]" in remeasure.calls[0][1] and "memory-bound" in remeasure.calls[0][1]
    assert evaluator.hardware.bandwidth == 1e15  # later evaluations use the raised ceiling
    assert first.hardware == second.hardware == evaluator.hardware.key() != low.key()
    assert first.pct_of_peak is not None and first.pct_of_peak < 1.05


@pytest.mark.alone  # a figure: the kernels must reach above the too-low ceiling
def test_a_kernel_still_above_the_remeasured_ceiling_stays_suspicious(
    evaluator: Evaluator, silu: Problem, kernels: list[Kernel]
):
    low = evaluator.hardware
    raised_to = low.bandwidth * 1.2  # higher, still far below what the kernels reach
    evaluator.remeasure = remeasure = FakeRemeasure(raised_to)
    first = evaluator.evaluate(kernels[0], silu, WORKLOAD)
    assert first.status is Status.SUSPICIOUS
    assert "bandwidth ceiling was re-measured and raised to" in first.error
    assert first.hardware == evaluator.hardware.key() != low.key()
    second = evaluator.evaluate(kernels[1], silu, WORKLOAD)
    assert second.status is Status.SUSPICIOUS
    assert len(remeasure.calls) == 1  # a second offender does not measure the machine again


def test_a_remeasurement_that_finds_nothing_higher_keeps_the_verdict(
    stubbed: Evaluator, silu: Problem, kernels: list[Kernel]
):
    low = stubbed.hardware
    stubbed.remeasure = remeasure = FakeRemeasure(1.0)  # lower: the ceiling stays
    evaluation = stubbed.evaluate(kernels[0], silu, WORKLOAD)
    assert evaluation.status is Status.SUSPICIOUS
    assert "re-measured and stays at" in evaluation.error
    assert evaluation.hardware == low.key()
    assert len(remeasure.calls) == 1


def test_a_failed_remeasurement_keeps_the_verdict_and_says_why(
    stubbed: Evaluator, silu: Problem, kernels: list[Kernel]
):
    calls = []

    def broken(spec: HardwareSpec, ceiling: str, why: str) -> HardwareSpec:
        calls.append(ceiling)
        raise RuntimeError("micro-benchmark triad failed")

    stubbed.remeasure = broken
    evaluation = stubbed.evaluate(kernels[0], silu, WORKLOAD)
    assert evaluation.status is Status.SUSPICIOUS
    assert "re-measuring the bandwidth ceiling failed: micro-benchmark triad failed" in (
        evaluation.error
    )
    assert stubbed.evaluate(kernels[0], silu, WORKLOAD).status is Status.SUSPICIOUS
    assert calls == ["bandwidth"]  # not tried again


def test_fixed_ceilings_are_never_remeasured(stubbed: Evaluator, silu, kernels):
    assert stubbed.remeasure is None  # a spec given by hand, as tests do
    evaluation = stubbed.evaluate(kernels[0], silu, WORKLOAD)
    assert evaluation.status is Status.SUSPICIOUS
    assert "re-measured" not in evaluation.error


def test_this_machines_measured_spec_is_remeasured_for_real(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path))
    low = low_bandwidth(1e9)
    measured = low.model_copy(
        update={"provenance": {c: f"measured: {c}" for c in hw_cache.CEILINGS}}
    )
    hw_cache.save_cpu_spec(measured)
    with Evaluator(measured, CONFIG.model_copy(update={"workers": 1})) as evaluator:
        assert evaluator.remeasure is hw_cache.raise_ceiling
    with Evaluator(low, CONFIG.model_copy(update={"workers": 1})) as evaluator:
        assert evaluator.remeasure is None  # not this machine's measured spec
