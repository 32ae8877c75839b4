"""A driver run in its own process by test_ray_cluster.py (Ray may end a driver whose cluster
vanishes, which must not be the test runner). Prints one JSON line.

    python cluster_driver.py local WORKSPACE              # make_profiler("ray") with no address
    python cluster_driver.py lost ADDRESS HEAD_PGID WORKSPACE   # kill the head mid-batch
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))  # run on its own: no conftest

from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.problems import load_problem
from accelopt.profiling.cluster.dispatcher import RetryPolicy
from accelopt.profiling.cluster.runner import RayOptions, RayRunner
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.factory import make_profiler
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.profiler import ClusterLostError
from accelopt.store.store import Store

HW = make_spec()  # the hw fixture's ceilings
CONFIG = EvalConfig(seeds=2, min_calls=10, min_time_s=0.2, call_timeout_floor_s=2.0)
SILU = load_problem("silu")


def variant(i: int) -> Kernel:
    source = shipped_kernel(SILU, "baseline").read_text()
    return Kernel(source.replace("{", f"{{ volatile int tag = {i}; (void)tag;", 1), "cpu", f"v{i}")


def local(workspace: str) -> dict[str, object]:
    import ray

    with Store.open(workspace) as store, make_profiler("ray", HW, CONFIG, store=store) as prof:
        started = ray.is_initialized()
        evaluation = prof.evaluate(variant(0), SILU, "small")
    return {"started": started, "status": evaluation.status.value, "after": ray.is_initialized()}


def lost(address: str, head_pgid: int, workspace: str) -> dict[str, object]:
    policy = RetryPolicy(probe_every_s=0.5, lost_after_s=2.0, start_timeout_s=10.0)
    runner = RayRunner(HW, CONFIG, RayOptions(address=address, policy=policy))
    store = Store.open(workspace)
    received: list[int] = []
    message = ""
    with CachedProfiler("ray", HW, CONFIG, runner, store) as profiler:
        try:
            for i, _ in profiler.evaluate_batch([(variant(i), SILU, "small") for i in range(12)]):
                received.append(i)
                if len(received) == 2:
                    os.killpg(head_pgid, signal.SIGKILL)
        except ClusterLostError as exc:
            message = str(exc)
    cached = [
        i for i in range(12) if store.get_evaluation(variant(i).hash, "silu", "small", HW.key())
    ]
    return {"message": message, "received": received, "cached": cached}


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    result = local(*args) if mode == "local" else lost(args[0], int(args[1]), args[2])
    print(json.dumps(result), flush=True)
