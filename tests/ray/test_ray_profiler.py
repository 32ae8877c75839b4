"""The ray profiler on a local Ray instance: the same verdicts as the local pool, an actor killed
mid-batch, crashing and hanging kernels inside an actor, and the shared evaluation cache."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.problems import Problem, load_problem
from accelopt.profiling.cluster.dispatcher import RetryPolicy
from accelopt.profiling.cluster.runner import RayOptions, RayRunner
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.factory import make_profiler
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.profiler import evaluate_all
from accelopt.store.store import Store

pytestmark = pytest.mark.ray

SILU, MATMUL = load_problem("silu"), load_problem("matmul")
# One OpenMP thread: a kernel's median then holds when other processes load the machine (with
# every core in use, an OpenMP barrier can wait out a scheduler slice and a call take milliseconds).
CONFIG = EvalConfig(
    seeds=2, min_calls=10, min_time_s=0.1, call_timeout_floor_s=2.0, workers=2, threads=1
)
POLICY = RetryPolicy(probe_every_s=1.0, lost_after_s=10.0, start_timeout_s=60.0, poll_s=0.05)


def baseline(problem: Problem) -> Kernel:
    return Kernel(shipped_kernel(problem, "baseline").read_text(), "cpu", "baseline")


def variant(i: int) -> Kernel:
    """The silu baseline with a harmless line, so that each ``i`` hashes differently."""
    source = shipped_kernel(SILU, "baseline").read_text()
    return Kernel(source.replace("{", f"{{ volatile int tag = {i}; (void)tag;", 1), "cpu", f"v{i}")


@pytest.fixture(scope="module")
def ray_runner(ray_cluster, hw) -> Iterator[RayRunner]:
    runner = RayRunner(hw, CONFIG, RayOptions(actors=2, policy=POLICY))
    try:
        assert runner.wait_ready(2, 60) == 2
        yield runner
    finally:
        runner.close()


@pytest.fixture(scope="module")
def ray_profiler(ray_runner, hw) -> CachedProfiler:
    return CachedProfiler("ray", hw, CONFIG, ray_runner)


@pytest.mark.timeout(120)
def test_local_and_ray_give_the_same_verdicts(ray_profiler, hw, kernel_named):
    jobs = [
        (baseline(SILU), SILU, "small"),
        (baseline(MATMUL), MATMUL, "small"),
        (kernel_named("returns_nan"), SILU, "small"),
        (kernel_named("compile_error"), SILU, "small"),
    ]
    with make_profiler("local", hw, CONFIG) as local:
        here = evaluate_all(local, jobs)
    there = evaluate_all(ray_profiler, jobs)
    assert [e.status for e in there] == [e.status for e in here]
    assert [e.status for e in here] == [
        Status.PASSED, Status.PASSED, Status.INCORRECT, Status.COMPILE_ERROR
    ]  # fmt: skip
    for a, b in zip(here[:2], there[:2], strict=True):
        assert a.latency_s and b.latency_s
        assert 1 / 3 < a.latency_s / b.latency_s < 3, (a.problem, a.latency_s, b.latency_s)
        # the cached roofline (a calibrated figure's peak is each timing's own control's)
        assert (a.hardware, a.cached.peak_s, a.threads) == (b.hardware, b.cached.peak_s, b.threads)


@pytest.mark.timeout(120)
def test_work_of_a_killed_actor_is_done_by_another(ray_cluster, ray_runner, ray_profiler):
    assert ray_runner.fleet is not None
    retired, retried = ray_runner.fleet.retired, ray_runner.dispatcher.retried
    jobs = [(variant(i), SILU, "small") for i in range(8)]
    found = {}
    for i, evaluation in ray_profiler.evaluate_batch(jobs):
        if not found:  # both actors hold work now: kill one
            ray_cluster.kill(next(iter(ray_runner.fleet.handles().values())))
        found[i] = evaluation
    assert sorted(found) == list(range(8))
    assert all(e.status is Status.PASSED for e in found.values()), [e.error for e in found.values()]
    assert ray_runner.fleet.retired == retired + 1
    assert ray_runner.dispatcher.retried > retried
    assert ray_runner.wait_ready(2, 60) == 2  # a replacement took its place


@pytest.mark.timeout(120)
def test_crashing_and_hanging_kernels_leave_the_actor_usable(
    ray_runner, ray_profiler, kernel_named
):
    assert ray_runner.fleet is not None
    actors, retired = set(ray_runner.fleet.handles()), ray_runner.fleet.retired
    jobs = [(kernel_named("segfault"), SILU, "small"), (kernel_named("spin"), SILU, "small")]
    found = dict(ray_profiler.evaluate_batch(jobs))
    assert found[0].status is Status.CRASH and "SIGSEGV" in found[0].error
    assert found[1].status is Status.TIMEOUT and "deadline" in found[1].error
    assert set(ray_runner.fleet.handles()) == actors and ray_runner.fleet.retired == retired
    after = [ray_profiler.evaluate(variant(100 + i), SILU, "small") for i in range(2)]
    assert all(e.status is Status.PASSED for e in after)


@pytest.mark.timeout(120)
def test_a_cached_evaluation_is_not_measured_again(ray_runner, hw, tmp_path):
    with Store.open(tmp_path / "workspace") as store:
        profiler = CachedProfiler("ray", hw, CONFIG, ray_runner, store)
        first = profiler.evaluate(variant(300), SILU, "small")
        again = profiler.evaluate(variant(300), SILU, "small")
        assert first.status is Status.PASSED
        assert again.seeds == first.seeds  # fresh random seeds every measurement: not measured
        assert (profiler.measured, profiler.cache_hits) == (1, 1)
        with make_profiler("local", hw, CONFIG, store=store) as local:  # the same cache
            assert local.evaluate(variant(300), SILU, "small").seeds == first.seeds
            assert local.measured == 0


@pytest.mark.timeout(120)
def test_the_factory_uses_this_process_ray_and_leaves_it_running(ray_cluster, hw):
    with make_profiler("ray", hw, CONFIG, actors=1) as profiler:
        assert profiler.kind == "ray" and profiler.threads == 1
        assert profiler.capacity == CONFIG.workers  # one actor
        assert profiler.evaluate(variant(400), SILU, "small").status is Status.PASSED
    assert ray_cluster.is_initialized()


@pytest.mark.timeout(120)
def test_a_workspace_problem_travels_to_the_actor(ray_profiler, tmp_path):
    """The actor is sent the problem's files: the workspace is gone before it evaluates."""
    import shutil
    from pathlib import Path

    from accelopt.problems.workspace import add_problem

    files = Path(__file__).parents[1] / "problems" / "workspace_files"
    problem = add_problem(files / "axpy.py", tmp_path / "ws")
    shutil.rmtree(tmp_path / "ws")
    good = Kernel((files / "axpy_rows.c").read_text(), "cpu", "good")
    wrong = Kernel((files / "axpy_rows_wrong.c").read_text(), "cpu", "wrong")
    results = evaluate_all(ray_profiler, [(good, problem, "tiny"), (wrong, problem, "tiny")])
    assert [e.status for e in results] == [Status.PASSED, Status.INCORRECT], results[0].error
    assert results[0].problem_version == problem.fingerprint
