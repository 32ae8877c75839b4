"""A re-timing session through the ray profiler: one job, one device actor, one worker."""

from __future__ import annotations

import pytest
from matmul_variants import GOOD, repeated

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.problems import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.factory import make_profiler

pytestmark = pytest.mark.ray

MATMUL = load_problem("matmul")
SILU = load_problem("silu")
SLOWER = repeated(8)  # side by side at least 3.3 times slower (see matmul_variants)
CONFIG = EvalConfig(
    seeds=2, min_calls=5, min_time_s=0.02, call_timeout_floor_s=5.0, threads=1, ci_time_cap_s=0.3
)


@pytest.mark.timeout(120)
def test_a_session_runs_on_one_device_actor(ray_cluster, hw):
    kernels = [Kernel(GOOD, "cpu", "parent"), Kernel(SLOWER, "cpu", "eight_passes")]
    with make_profiler("ray", hw, CONFIG, actors=1) as profiler:
        result = profiler.retime(kernels, MATMUL, "small")
        assert profiler.measured == 0  # a session is not an evaluation of the cache's
    assert [e.status for e in result.evaluations] == [Status.PASSED, Status.PASSED], [
        e.error for e in result.evaluations
    ]
    assert result.worker_pid is not None and result.rounds >= 8
    assert result.ratios[0] == 1.0
    assert result.ratios[1] is not None and result.ratios[1] > 2.0, result


@pytest.mark.timeout(120)
def test_a_race_is_run_on_a_device_actor(ray_cluster, hw):
    """A search's candidate racing its parent stops timing on the actor as it does locally."""
    # silu's small workload: calls of microseconds; timed 0.3 s at least, so that the 16 samples
    # a race needs come before the timing may end as precise (it may well, where the machine's
    # drift history is wide: then it is a final figure, not a race); a source of its own, so that
    # no final evaluation of the baseline in the session's cache answers instead
    source = shipped_kernel(SILU, "baseline").read_text() + "\n/* raced on a device actor */\n"
    kernel = Kernel(source, "cpu", "baseline")
    long_enough = CONFIG.model_copy(update={"min_calls": 24, "min_time_s": 0.3})
    with make_profiler("ray", hw, long_enough, actors=1) as profiler:
        raced = profiler.race(kernel, SILU, "small", race_s=1e-9)
        assert profiler.measured == 1
    assert raced.status is Status.PASSED and raced.raced, raced.error
    assert raced.ci_low_s is not None and raced.ci_low_s > 1e-9  # the interval it had
