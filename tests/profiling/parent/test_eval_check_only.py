"""``check_only`` evaluations, parallel evaluation across the pool, and a clean shutdown."""

from __future__ import annotations

import pytest
from parallel_eval import evaluate_in_parallel

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.problems import Problem, load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.evaluator import Evaluator

CONFIG = EvalConfig(seeds=3, check_only=True, call_timeout_floor_s=5.0, workers=2)


def baseline(problem: Problem) -> Kernel:
    return Kernel(shipped_kernel(problem, "baseline").read_text(), "cpu", "baseline")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["silu", "matmul"])
def test_check_only_passes_without_timing(evaluator, name):
    problem = load_problem(name)
    evaluation = evaluator.evaluate(baseline(problem), problem, "cpu")
    assert evaluation.status is Status.PASSED, evaluation.error
    assert evaluation.error == ""
    assert evaluation.latency_s is None and evaluation.pct_of_peak is None
    assert evaluation.noise is None and evaluation.calls == 0
    assert evaluation.rotation_sets is None and evaluation.time_s is None
    assert evaluation.max_rel_err is not None and evaluation.max_rel_err <= problem.tolerance
    assert len(evaluation.seeds) == CONFIG.seeds
    assert evaluation.peak_s > 0


@pytest.mark.timeout(120)
def test_parallel_evaluations_keep_the_order_of_the_jobs(evaluator, kernel_file):
    silu, matmul = load_problem("silu"), load_problem("matmul")
    jobs = [
        (kernel_file("segfault"), silu, "cpu"),
        (baseline(matmul), matmul, "cpu"),
        (kernel_file("writes_nothing"), silu, "cpu"),
        (kernel_file("includes_stdio"), silu, "cpu"),
        (baseline(silu), silu, "cpu"),
    ]
    evaluations = list(evaluate_in_parallel(evaluator, jobs))
    assert [(e.problem, e.kernel) for e in evaluations] == [(p.name, k.name) for k, p, _ in jobs]
    assert [e.status for e in evaluations] == [
        Status.CRASH,
        Status.PASSED,
        Status.INCORRECT,
        Status.REJECTED,
        Status.PASSED,
    ]


@pytest.mark.timeout(120)
def test_close_stops_every_worker(accelopt_cache, hw):
    silu = load_problem("silu")
    with Evaluator(hw, CONFIG.model_copy(update={"workers": 1})) as ev:
        assert ev.evaluate(baseline(silu), silu, "cpu").status is Status.PASSED
        workers = list(ev.pool._idle)
        assert len(workers) == 1
    for worker in workers:
        assert worker.proc.poll() is not None
        assert not worker.scratch.exists()
