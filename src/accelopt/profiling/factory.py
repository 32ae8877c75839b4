"""``make_profiler``: the profiler ``--profiler`` names, its runner behind the evaluation cache.

The ``ray`` runner is imported only when asked for (Ray is an optional extra)."""

from __future__ import annotations

from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.parent.local import LocalRunner
from accelopt.profiling.profiler import PROFILERS, EvaluationCache, Runner


def make_profiler(
    kind: str,
    hardware: HardwareSpec,
    config: EvalConfig | None = None,
    ray_address: str | None = None,
    store: EvaluationCache | None = None,
    *,
    actors: int | None = None,
) -> CachedProfiler:
    """The profiler ``--profiler`` names: ``local`` (this machine's pool) or ``ray``.

    ``ray_address`` (``ray`` only): a running cluster, ``HOST:PORT`` of its head (or ``auto``:
    the cluster this machine belongs to); without one a local Ray instance is started and stopped
    on close. The command must run on a machine of the cluster (Ray's client mode is untested).
    ``actors`` (``ray`` only): how many device actors (default: one per device the cluster
    declares; one for a local instance). ``store``: the workspace whose evaluation cache to use.
    """
    config = config or EvalConfig()
    runner: Runner
    if kind == "local":
        if ray_address is not None:
            raise UserError(
                "--ray-address needs --profiler ray (the local profiler uses no cluster)"
            )
        if actors is not None:
            raise UserError("actors are for --profiler ray; the local pool size is --workers")
        runner = LocalRunner(hardware, config)
    elif kind == "ray":
        from accelopt.profiling.cluster.runner import RayOptions, RayRunner

        runner = RayRunner(hardware, config, RayOptions(address=ray_address, actors=actors))
    else:
        raise UserError(f"unknown profiler {kind!r}; choose one of: {', '.join(PROFILERS)}")
    return CachedProfiler(kind, hardware, config, runner, store)
