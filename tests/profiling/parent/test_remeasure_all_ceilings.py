"""An Evaluator re-measures the machine once, whichever ceilings its kernels beat: the first beaten
ceiling has every ceiling re-measured together, and a second one beaten later (another bound)
finds it done, so the spec (its key) changes once. The worker's result is a fixed one and the
re-measurement is faked: nothing runs, nothing is measured."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.evaluator import Evaluator
from accelopt.profiling.worker.protocol import EvaluationAnswer, KernelResult

CONFIG = EvalConfig(seeds=1, seed=7, min_calls=5, min_time_s=0, workers=1)
# 3 ms a call: far above a 1 GFLOP/s, 1 GB/s machine for silu (memory-bound: 59 ms at peak) and
# for matmul (matmul-bound: 1 s at peak) alike.
ANSWER = EvaluationAnswer(result=KernelResult(latency_s=3e-3, calls=5, min_s=3e-3))
LOW = make_spec(name="cpu:too-low", matmul_rate=1e9, vector_rate=1e9, bandwidth=1e9)
RAISED = {"matmul_rate": 2e9, "vector_rate": 2e9, "bandwidth": 2e9}  # higher, still beaten


class RemeasureAll:
    """Stands for ``hardware.cache.raise_ceiling``: every ceiling raised to RAISED at once."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, spec: HardwareSpec, ceiling: str, why: str) -> HardwareSpec:
        self.calls.append(ceiling)
        return spec.model_copy(update=RAISED)


@pytest.fixture
def evaluator(accelopt_cache) -> Iterator[Evaluator]:
    with Evaluator(LOW, CONFIG) as ev:
        ev.pool.ask = lambda request, deadlines, cap: ANSWER.model_copy(deep=True)  # type: ignore[method-assign]
        yield ev


def _baseline(name: str) -> tuple[Kernel, object]:
    problem = load_problem(name)
    return Kernel(shipped_kernel(problem, "baseline").read_text(), "cpu", "baseline"), problem


def test_two_ceilings_beaten_in_turn_remeasure_the_machine_once(evaluator: Evaluator):
    evaluator.remeasure = remeasure = RemeasureAll()
    silu_kernel, silu = _baseline("silu")
    matmul_kernel, matmul = _baseline("matmul")
    memory = evaluator.evaluate(silu_kernel, silu, "cpu")  # beats the bandwidth ceiling
    compute = evaluator.evaluate(matmul_kernel, matmul, "cpu")  # then the matmul ceiling
    assert remeasure.calls == ["bandwidth"]  # once: every ceiling then, none again
    assert memory.status is compute.status is Status.SUSPICIOUS
    assert memory.hardware == compute.hardware == evaluator.hardware.key() != LOW.key()
    assert "the bandwidth ceiling was re-measured and raised to 2.0 GB/s" in memory.error
    assert "the matmul_rate ceiling was re-measured and raised to 2.0 GFLOP/s" in compute.error
