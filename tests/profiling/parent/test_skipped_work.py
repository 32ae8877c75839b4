"""Kernels that do less work than the problem needs, and are right on every call they are checked
on: one recomputes only the parts of the output the changed inputs reach, one copies an output
it saved when sampled inputs match. Neither passes at its timed speed (``freshness.py``): a full
batch rewrites every input, so only the sparse batches can be fast, and sparse calls clearly
faster than full ones are SUSPICIOUS; a copy that is stale in a few elements fails the audit's
element-by-element check. Each source with its cheat compiled out (``#define HONEST``) passes
under the same configuration, so these tests can fail."""

from __future__ import annotations

import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.problems import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.evaluator import Evaluator

pytestmark = pytest.mark.alone  # a cheat is told from an honest kernel by their timings

# Some batches full at random (as a memory-bound problem gets them); small workloads, short timing.
CONFIG = EvalConfig(
    seeds=2,
    warmup_calls=2,
    min_calls=20,
    min_time_s=0.05,
    ci_time_cap_s=0.4,
    call_timeout_floor_s=5.0,
    workers=1,
    memory_cap_bytes=1 << 30,
    verify_calls=4,
    full_batches="some",
    rotation_budget_bytes=48 << 20,  # 5 sets of the cpu workload's matmul
)


def variant(kernel: Kernel, define: str) -> Kernel:
    """The kernel with a macro defined before its first line."""
    return Kernel(f"#define {define}\n{kernel.source}", kernel.backend, f"{kernel.name}+{define}")


def evaluate(evaluator: Evaluator, kernel: Kernel, problem: str) -> Evaluation:
    # matmul at the cpu workload: at the small one a diff of the inputs costs about as much as
    # the multiplication (35 us), so the cheat gains nothing there.
    workload = "cpu" if problem == "matmul" else "small"
    return evaluator.evaluate(kernel, load_problem(problem), workload)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("throttle", [None, "THROTTLE 3"])
def test_recomputing_only_what_changed_is_suspicious(evaluator, kernel_file, throttle):
    cheat = kernel_file("recomputes_what_changed")
    kernel = variant(cheat, throttle) if throttle else cheat
    evaluation = evaluate(evaluator, kernel, "matmul")
    assert evaluation.status is Status.SUSPICIOUS, evaluation.error
    assert "changed in a few places" in evaluation.error
    assert "recomputes only what changed" in evaluation.error


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "name, problem", [("recomputes_what_changed", "matmul"), ("caches_outputs_by_content", "silu")]
)
def test_the_same_source_with_its_cheat_compiled_out_passes(evaluator, kernel_file, name, problem):
    evaluation = evaluate(evaluator, variant(kernel_file(name), "HONEST"), problem)
    assert evaluation.status is Status.PASSED, evaluation.error


@pytest.mark.timeout(120)
def test_copying_a_saved_output_by_content_fails(evaluator, kernel_file):
    evaluation = evaluate(evaluator, kernel_file("caches_outputs_by_content"), "silu")
    assert evaluation.status in (Status.INCORRECT, Status.SUSPICIOUS), evaluation.error
    if evaluation.status is Status.INCORRECT:
        assert "timed call" in evaluation.error and "elements" in evaluation.error
    else:
        assert "caches results" in evaluation.error


@pytest.mark.timeout(120)
def test_where_every_batch_is_full_the_cheat_gains_nothing(accelopt_cache, hw, kernel_file):
    # Every batch rewrites its inputs: nothing is left to reuse, the cheat multiplies each time.
    config = CONFIG.model_copy(update={"full_batches": "all"})
    cheat = kernel_file("recomputes_what_changed")
    with Evaluator(hw, config) as evaluator:
        cheated = evaluate(evaluator, cheat, "matmul")
        honest = evaluate(evaluator, variant(cheat, "HONEST"), "matmul")
    assert cheated.status is Status.PASSED and honest.status is Status.PASSED, cheated.error
    assert cheated.latency_s is not None and honest.latency_s is not None
    assert cheated.latency_s > 0.7 * honest.latency_s
