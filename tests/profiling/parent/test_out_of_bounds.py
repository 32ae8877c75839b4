"""Kernels that touch memory outside their buffers, through one Evaluator on silu's small workload.

Each computes the right answer, so only the guard regions (writes near a buffer) or the fence pages
of the correctness calls (accesses far from it) can tell: without them every one is PASSED.
"""

from __future__ import annotations

import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.problems import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.evaluator import Evaluator

CONFIG = EvalConfig(
    seeds=5,  # overruns_when_timed.c counts on five correctness calls
    seed=20260515,
    warmup_calls=2,
    min_calls=5,
    min_time_s=0.01,
    call_timeout_floor_s=5.0,
    workers=1,
)


@pytest.fixture(scope="module")
def run(evaluator: Evaluator, silu: Problem):
    def evaluate(kernel: Kernel) -> Evaluation:
        return evaluator.evaluate(kernel, silu, "small")

    return evaluate


@pytest.mark.timeout(120)
def test_honest_kernel_passes(run, silu):
    evaluation = run(Kernel(shipped_kernel(silu, "baseline").read_text(), "cpu", "baseline"))
    assert evaluation.status is Status.PASSED, evaluation.error


@pytest.mark.timeout(60)
def test_one_float_past_the_output_is_incorrect(run, kernel_file):
    evaluation = run(kernel_file("writes_past_output"))
    assert evaluation.status is Status.INCORRECT
    assert "wrote 1 float past the end of output 'y' (seed 1 of 5)" in evaluation.error


@pytest.mark.timeout(60)
def test_floats_before_the_output_are_incorrect(run, kernel_file):
    evaluation = run(kernel_file("writes_before_output"))
    assert evaluation.status is Status.INCORRECT
    assert "wrote 3 floats before the start of output 'y' (seed 1 of 5)" in evaluation.error


@pytest.mark.timeout(60)
def test_writing_past_a_const_input_is_incorrect(run, kernel_file):
    evaluation = run(kernel_file("writes_past_input"))
    assert evaluation.status is Status.INCORRECT
    assert "wrote 1 float past the end of input 'x'" in evaluation.error
    assert "the furthest 8 floats past it" in evaluation.error


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "name",
    [
        "reads_past_guard",  # 16 KiB past the end: without the fence, other heap memory
        "reads_far_past_input",  # 1 MiB past the end
    ],
)
def test_reading_past_an_input_is_a_crash_naming_the_cause(run, evaluator, kernel_file, name):
    replaced = evaluator.pool.replaced
    evaluation = run(kernel_file(name))
    assert evaluation.status is Status.CRASH
    assert "the kernel was killed by SIGSEGV" in evaluation.error
    assert "outside its buffers" in evaluation.error
    assert "kernel call (seed 1 of 5)" in evaluation.error
    assert evaluator.pool.replaced == replaced  # the kernel's process died, not the worker


@pytest.mark.timeout(60)
def test_overrun_only_in_the_timed_calls_is_incorrect(run, kernel_file):
    evaluation = run(kernel_file("overruns_when_timed"))
    assert evaluation.status is Status.INCORRECT
    assert "wrote 1 float past the end of output 'y' (in the timed calls)" in evaluation.error
    assert evaluation.latency_s is not None  # it was timed, then judged


@pytest.mark.timeout(60)
def test_the_pool_still_passes_an_honest_kernel(run, silu):
    evaluation = run(Kernel(shipped_kernel(silu, "baseline").read_text(), "cpu", "baseline"))
    assert evaluation.status is Status.PASSED, evaluation.error
