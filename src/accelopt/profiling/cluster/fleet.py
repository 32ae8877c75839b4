"""The ``ray`` profiler's Ray side: the device actors (``DeviceActor``), the ``RayFleet`` that
starts, watches and replaces them for the dispatcher (``dispatcher.py``), and this process's
connection to Ray (``RayConnection``).

**Devices are Ray resources.** A node started with ``accelopt worker --devices cpu:N`` declares
``N`` units of the resource ``accelopt_cpu`` (``device_resource``); every device actor asks for
one unit, so a device has exactly one actor, and one GPU where its backend's kernels run on one
(``gpus_per_actor``). Inside its actor the device's ``Evaluator`` builds and checks kernels
concurrently in its isolated worker pool (``workers`` processes, the device lock held shared) and
times one kernel at a time (the device lock held exclusive, shared by every process of the
machine, so two actors declared on one machine never time at once either). The actor itself never
runs kernel code: its workers do, as on a single machine.

Without an address a local Ray instance is started and shut down on close (Ray's ``ray.init``
leaves usage statistics off for a local instance it starts); if this process is already connected
to Ray (a test, a notebook), that connection is used and left open. Ray itself is imported only by
``import_ray``, when a ``RayRunner`` is made, and passed in: the rest of this module is plain
Python.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from accelopt.backends.base import get_backend
from accelopt.backends.kernel import Kernel
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.shipping import ProblemRef, problem_ref, resolve_ref
from accelopt.profiling.cluster.dispatcher import (
    ActorLost,
    Answer,
    JobFailed,
    RaceJob,
    RetimeJob,
    Work,
)
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.profiler import ClusterLostError
from accelopt.profiling.session import Retiming

GET_TIMEOUT_S = 30.0  # fetching a result Ray already reported ready
PROBE_TIMEOUT_S = 3.0  # one TCP connection to the head
CLOSE_TIMEOUT_S = 10.0  # actors shutting their worker pools down


def device_resource(backend: str) -> str:
    """The Ray resource a node declares per device of ``backend`` (``accelopt_cpu``)."""
    return f"accelopt_{backend}"


def gpus_per_actor(backend: str) -> int:
    """GPUs a device actor asks Ray for: one where the backend's kernels run on a GPU (Ray then
    gives each actor its own ``CUDA_VISIBLE_DEVICES``), none where they run on the CPU (C kernels,
    NumPy, Triton's CPU interpreter)."""
    return 1 if get_backend(backend).runs_on_gpu() else 0


def import_ray(address: str | None = None) -> Any:
    """The ``ray`` module, or a UserError saying how to install it. For a local instance or a
    head on loopback, Ray keeps its node on 127.0.0.1 (else its servers listen on every address,
    docs/scaling.md): what ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` does, set on Ray's constant,
    since nothing here writes the environment."""
    try:
        import ray
    except ImportError:
        raise UserError(
            "the ray profiler needs Ray: pip install 'accelopt[ray]' (or use --profiler local)"
        ) from None
    host = (address or "").rpartition(":")[0] or address or ""
    if address is None or host in ("127.0.0.1", "localhost"):
        with contextlib.suppress(ImportError, AttributeError):  # a Ray without it: as it is
            from ray._private import ray_constants

            ray_constants.ENABLE_RAY_CLUSTER = False
    return ray


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAISED = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?(\w*(?:Error|Exception)\w*): (.+)")


def _brief(exc: BaseException) -> str:
    """The telling line of a Ray error (they run to a screenful): the exception the actor
    raised (the last ``Name: message`` of its traceback), else why Ray says it died."""
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    for line in reversed(lines):
        raised = _RAISED.match(line)
        if raised:
            return f"{raised.group(1)}: {raised.group(2)}"
        if line.startswith("The actor is dead because"):
            return line
    return lines[0] if lines else type(exc).__name__


def _tcp_target(address: str) -> tuple[str, int] | None:
    host, _, port = address.removeprefix("ray://").rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


def _reachable(target: tuple[str, int] | None) -> bool:
    if target is None:
        return True
    try:
        with socket.create_connection(target, timeout=PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


# -- the actor ---------------------------------------------------------------------------------


class DeviceActor:
    """One device: an ``Evaluator`` (and its isolated worker pool) on the node that holds it.

    Made a Ray actor by ``RayFleet`` (threaded: ``workers`` evaluations at once, plus one thread
    for ``describe``/``close``). Its arguments and answers are accelopt's own records.
    """

    def __init__(self, hardware_json: str, config_json: str) -> None:
        from accelopt.profiling.parent.evaluator import Evaluator

        self.hardware = HardwareSpec.model_validate_json(hardware_json)
        self.evaluator = Evaluator(self.hardware, EvalConfig.model_validate_json(config_json))

    def describe(self) -> dict[str, Any]:
        from accelopt.hardware.cpuinfo import available_cpus, cpu_model_name

        return {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "device": f"{self.hardware.backend}:{cpu_model_name()}",
            "cores": available_cpus(),
        }

    def evaluate(
        self,
        source: str,
        backend: str,
        name: str,
        problem: ProblemRef,
        workload: str,
        race_s: float | None = None,
    ) -> Evaluation:
        kernel = Kernel(source, backend, name)
        return self.evaluator.evaluate(kernel, resolve_ref(problem), workload, race_s=race_s)

    def retime(
        self, sources: list[tuple[str, str]], backend: str, problem: ProblemRef, workload: str
    ) -> Retiming:
        """``sources``: (source, name) per kernel, the reference first."""
        kernels = [Kernel(source, backend, name) for source, name in sources]
        return self.evaluator.retime(kernels, resolve_ref(problem), workload)

    def close(self) -> None:
        self.evaluator.close()


# -- the fleet ---------------------------------------------------------------------------------


@dataclass
class _Actor:
    handle: Any
    ready_ref: Any
    info: dict[str, Any] | None = None
    dead: bool = False


class RayFleet:
    """The device actors on a Ray cluster (the ``Fleet`` the dispatcher drives)."""

    def __init__(
        self,
        ray: Any,
        hardware: HardwareSpec,
        config: EvalConfig,
        count: int,
        restarts: int,
        probe_target: tuple[str, int] | None,
    ) -> None:
        self.ray = ray
        self.actor_class = ray.remote(DeviceActor).options(
            num_cpus=0,
            num_gpus=gpus_per_actor(hardware.backend),  # Ray then sets CUDA_VISIBLE_DEVICES
            resources={device_resource(hardware.backend): 1},
            max_concurrency=config.workers + 1,
            max_restarts=0,
            max_task_retries=0,
        )
        self.args = (hardware.model_dump_json(), config.model_dump_json())
        self.actors: dict[str, _Actor] = {}
        self.restarts_left = restarts
        self.probe_target = probe_target
        self.last_error = ""
        self.retired = 0  # actors lost or killed since the start
        self.device: tuple[str, int] | None = None  # (device, cores) of the first ready actor
        self._serial = 0
        for _ in range(count):
            self._start()

    def _start(self) -> None:
        self._serial += 1
        handle = self.actor_class.remote(*self.args)
        self.actors[f"actor-{self._serial}"] = _Actor(handle, handle.describe.remote())

    def handles(self) -> dict[str, Any]:
        """Ready, live actors by id (for tests and tools)."""
        return {i: a.handle for i, a in self.actors.items() if a.info is not None and not a.dead}

    def ready(self) -> list[str]:
        starting = {a.ready_ref: i for i, a in self.actors.items() if a.info is None and not a.dead}
        if starting:
            done, _ = self._guard(
                lambda: self.ray.wait(list(starting), num_returns=len(starting), timeout=0)
            )
            for ref in done:
                self._started(starting[ref], ref)
        return list(self.handles())

    def _started(self, actor: str, ref: Any) -> None:
        try:
            info = self.ray.get(ref, timeout=GET_TIMEOUT_S)
        except self.ray.exceptions.RayError as exc:
            self.retire(actor, f"a device actor failed to start: {_brief(exc)}")
            return
        device = (str(info["device"]), int(info["cores"]))
        if self.device is None:
            self.device = device
        elif device != self.device:
            raise ClusterLostError(
                f"the cluster's devices differ ({info['host']}: {device[0]} with {device[1]} "
                f"cores; others: {self.device[0]} with {self.device[1]}): a search compares "
                "timings, so give it devices of one kind"
            )
        self.actors[actor].info = info

    def starting(self) -> int:
        return sum(1 for a in self.actors.values() if a.info is None and not a.dead)

    def submit(self, actor: str, job: Work) -> Hashable:
        handle = self.actors[actor].handle
        if isinstance(job, RetimeJob):
            sources = [(k.source, k.name) for k in job.kernels]
            backend = job.kernels[0].backend
            ref = problem_ref(job.problem)
            return self._guard(lambda: handle.retime.remote(sources, backend, ref, job.workload))
        race_s = job.race_s if isinstance(job, RaceJob) else None
        kernel, problem, workload = job.job if isinstance(job, RaceJob) else job
        return self._guard(
            lambda: handle.evaluate.remote(
                kernel.source, kernel.backend, kernel.name, problem_ref(problem), workload, race_s
            )
        )

    def wait(self, tickets: list[Hashable], timeout: float) -> list[Hashable]:
        def both() -> list[Hashable]:
            done, rest = self.ray.wait(tickets, num_returns=1, timeout=timeout)
            if done and rest:
                done += self.ray.wait(rest, num_returns=len(rest), timeout=0)[0]
            return done

        return self._guard(both)

    def result(self, ticket: Hashable) -> Answer:
        errors = self.ray.exceptions
        try:
            value = self.ray.get(ticket, timeout=GET_TIMEOUT_S)
        except (errors.RaySystemError, errors.LocalRayletDiedError) as exc:
            raise ClusterLostError(
                f"lost the Ray cluster: {_brief(exc)}", unreachable=True
            ) from None
        except errors.RayTaskError as exc:
            raise JobFailed(_brief(exc)) from None
        except errors.RayError as exc:  # the actor or its node died, or the answer was lost
            raise ActorLost(_brief(exc)) from None
        if not isinstance(value, Evaluation | Retiming):
            raise JobFailed(f"the actor answered a {type(value).__name__}")
        return value

    def retire(self, actor: str, reason: str) -> None:
        entry = self.actors.get(actor)
        if entry is None or entry.dead:
            return
        entry.dead = True
        self.retired += 1
        self.last_error = reason
        with contextlib.suppress(Exception):
            self.ray.kill(entry.handle, no_restart=True)
        if self.restarts_left > 0:
            self.restarts_left -= 1
            self._start()

    def alive(self) -> bool:
        return _reachable(self.probe_target)

    def describe(self, actor: str) -> str:
        info = self.actors[actor].info if actor in self.actors else None
        return f"the device actor on {info['host']} (pid {info['pid']})" if info else actor

    def _guard(self, call: Callable[[], Any]) -> Any:
        """A Ray call outside a task's own failure: any error means the cluster is gone."""
        try:
            return call()
        except (ConnectionError, OSError, self.ray.exceptions.RayError) as exc:
            raise ClusterLostError(
                f"lost the Ray cluster: {_brief(exc)}", unreachable=True
            ) from None

    def close(self, graceful: bool, lost: bool = False) -> None:
        """Ask the live actors to close (``graceful``), then kill them. Not on a ``lost``
        cluster: its actors went with its control store, and ``ray.kill`` would wait for that
        store until Ray aborts this process (60 s), losing the one-sentence error."""
        live = [a.handle for a in self.actors.values() if not a.dead]
        if lost:
            return
        if graceful and live:
            with contextlib.suppress(Exception):
                refs = [h.close.remote() for h in live]
                self.ray.wait(refs, num_returns=len(refs), timeout=CLOSE_TIMEOUT_S)
        for handle in live:
            with contextlib.suppress(Exception):
                self.ray.kill(handle, no_restart=True)


@dataclass
class RayConnection:
    """This process's connection to Ray: made here (and closed here) or found already open."""

    ray: Any
    owned: bool
    where: str
    probe_target: tuple[str, int] | None

    @classmethod
    def open(
        cls, ray: Any, address: str | None, resource: str, local_devices: int, temp_dir: str | None
    ) -> RayConnection:
        """Join the head at ``address``, else start a local instance declaring ``local_devices``
        units of ``resource`` (its session files under ``temp_dir``); a connection this process
        already has is used instead (and left open on close)."""
        if address is None:
            if ray.is_initialized():
                return cls._here(ray, owned=False, where="this process's Ray instance")
            # A local instance reports no usage statistics: ray.init turns them off for the
            # instances it starts (except on Ray's nightly wheels): accelopt opts no one in.
            ray.init(
                address="local",  # a new instance, even where RAY_ADDRESS names a cluster
                include_dashboard=False,
                num_cpus=0,  # device actors ask for devices, not Ray CPUs
                resources={resource: local_devices},
                _temp_dir=temp_dir,
                _node_ip_address="127.0.0.1",
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
            return cls._here(ray, owned=True, where="the local Ray instance")
        if ray.is_initialized():
            return cls._here(ray, owned=False, where=f"the Ray cluster at {address}")
        target = _tcp_target(address)
        if not _reachable(target):
            raise UserError(
                f"no Ray head answers at {address}: start one there with "
                "`accelopt worker --head`, or check the address and port"
            )
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        except Exception as exc:
            raise UserError(f"cannot join the Ray cluster at {address}: {_brief(exc)}") from None
        return cls(ray, True, f"the Ray cluster at {address}", target or cls._gcs(ray))

    @classmethod
    def _here(cls, ray: Any, owned: bool, where: str) -> RayConnection:
        return cls(ray, owned, where, cls._gcs(ray))

    @staticmethod
    def _gcs(ray: Any) -> tuple[str, int] | None:
        address = getattr(ray.get_runtime_context(), "gcs_address", None)
        return _tcp_target(address) if address else None

    def devices(self, resource: str) -> int:
        return int(self.ray.cluster_resources().get(resource, 0))

    def close(self) -> None:
        if self.owned:
            self.ray.shutdown()
