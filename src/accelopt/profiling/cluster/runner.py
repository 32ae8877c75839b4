"""The ``ray`` profiler: ``RayRunner``, the ``Runner`` behind ``make_profiler("ray", ...)``, runs
every job on one device actor per device of a Ray cluster, each owning an ``Evaluator``
(``parent/``) with its own isolated worker pool.

It puts together the pieces of ``cluster/``: this process's connection to Ray and the device
actors (``fleet.py``), and the ``Dispatcher`` that hands jobs to them, retries those whose actor
is lost and fails the rest with one ``ClusterLostError`` when the cluster is lost
(``dispatcher.py``). A re-timing session (``RayRunner.retime``, ``session.py``) is one job like
the others, on one device actor.

Without an address (``RayOptions``) a local Ray instance is started (devices: ``actors``,
default 1) and shut down on close; if this process is already connected to Ray (a test, a
notebook), that connection is used and left open. Ray is imported only when a ``RayRunner`` is
made.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass, field

from accelopt.backends.kernel import Kernel
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.cluster.dispatcher import (
    Answer,
    Dispatcher,
    RaceJob,
    RetimeJob,
    RetryPolicy,
    Work,
    failure_of,
)
from accelopt.profiling.cluster.fleet import RayConnection, RayFleet, device_resource, import_ray
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profiler import ClusterLostError, Job, Measured
from accelopt.profiling.session import Retiming


@dataclass(frozen=True)
class RayOptions:
    address: str | None = None  # HOST:PORT of a head, or "auto"; None: a local instance
    actors: int | None = None  # device actors; None: one per declared device (local: 1)
    temp_dir: str | None = None  # Ray's session files, for a local instance
    restarts: int | None = None  # replacements of dead actors in all; None: 2 per actor + 2
    policy: RetryPolicy = field(default_factory=RetryPolicy)


class RayRunner:
    """The ``Runner`` behind ``make_profiler("ray", ...)``."""

    def __init__(self, hardware: HardwareSpec, config: EvalConfig, options: RayOptions) -> None:
        ray = import_ray(options.address)
        self.options = options
        # the spec the device actors score with (a ceiling one of them raises stays its own)
        self.hardware = hardware
        self.threads = config.threads or hardware.cores
        resource = device_resource(hardware.backend)
        self.session = RayConnection.open(
            ray, options.address, resource, options.actors or 1, options.temp_dir
        )
        self.fleet: RayFleet | None = None
        try:
            declared = self.session.devices(resource)
            count = options.actors or declared
            if declared < 1 or count < 1:
                raise UserError(
                    f"{self.session.where} declares no {hardware.backend} "
                    f"device: start its workers with `accelopt worker --devices "
                    f"{hardware.backend}:1`"
                )
            restarts = options.restarts if options.restarts is not None else 2 * count + 2
            self.fleet = RayFleet(ray, hardware, config, count, restarts, self.session.probe_target)

            def failure(job: Work, reason: str) -> Answer:
                return failure_of(job, reason, hardware, self.threads)

            self.dispatcher = Dispatcher(
                self.fleet, options.policy, config.workers, failure, self.session.where
            )
            self.capacity = count * config.workers
            self.wait_ready(count, options.policy.start_timeout_s)
            self._check_device(hardware)
            self.dispatcher.start()
        except BaseException:
            if self.fleet is not None:
                self.fleet.close(graceful=False)
            self.session.close()
            raise

    def wait_ready(self, count: int, timeout: float) -> int:
        """Wait until ``count`` actors are ready (or, after 10 s, at least one); how many are.
        Only before the dispatcher starts: then it alone drives the fleet."""
        assert self.fleet is not None
        start = time.monotonic()
        while True:
            ready = len(self.fleet.ready())
            waited = time.monotonic() - start
            if ready >= count or (ready and waited >= 10.0):
                return ready
            if not self.fleet.starting():
                raise UserError(
                    f"no device actor could start on {self.session.where} ({self.fleet.last_error})"
                )
            if waited >= timeout:
                raise UserError(
                    f"no device actor started on {self.session.where} within "
                    f"{waited:.0f} s ({self.fleet.last_error or 'its devices are all in use'})"
                )
            time.sleep(0.05)

    def _check_device(self, hardware: HardwareSpec) -> None:
        """Ceilings measured on this machine score kernels timed on the cluster's devices: they
        must be the same kind of device (a spec from elsewhere, e.g. a datasheet, is trusted)."""
        from accelopt.hardware.cpuinfo import available_cpus, cpu_model_name

        assert self.fleet is not None
        here = (f"{hardware.backend}:{cpu_model_name()}", available_cpus())
        device = self.fleet.device
        if hardware.name == here[0] and device is not None and device != here:
            raise UserError(
                f"the cluster's devices ({device[0]}, {device[1]} cores) are not this machine's "
                f"({here[0]}, {here[1]} cores), whose ceilings would score them: run the "
                "command on a machine of the cluster's kind, e.g. its head"
            )

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        futures = {self.dispatcher.submit(job): i for i, job in enumerate(jobs)}
        lost: ClusterLostError | None = None
        for future in as_completed(futures):
            try:
                evaluation, measured = future.result()
            except ClusterLostError as exc:
                lost = lost or exc
                continue
            assert isinstance(evaluation, Evaluation)
            yield Measured(futures[future], evaluation, measured)
        if lost is not None:
            raise lost

    def race(self, job: Job, race_s: float) -> Evaluation:
        """One evaluation on a device actor whose timing stops early once clearly slower than
        ``race_s``; raises ClusterLostError when the cluster is lost."""
        answer, _ = self.dispatcher.submit(RaceJob(job, race_s)).result()
        assert isinstance(answer, Evaluation)
        return answer

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> Retiming:
        """One session on one device actor; raises ClusterLostError when the cluster is lost."""
        if not kernels:
            raise ValueError("a re-timing session needs at least one kernel")
        answer, _ = self.dispatcher.submit(RetimeJob(tuple(kernels), problem, workload)).result()
        assert isinstance(answer, Retiming)
        return answer

    def close(self) -> None:
        lost = self.dispatcher.broken  # a lost cluster: no point asking its actors to close
        self.dispatcher.close()
        if self.fleet is not None:
            self.fleet.close(graceful=lost is None, lost=lost is not None and lost.unreachable)
        self.session.close()
