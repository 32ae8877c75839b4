"""The ``Evaluator``: static checks in the parent, everything else in the worker pool.

``evaluate`` never raises for a bad kernel: every outcome is an ``Evaluation`` with a status.

``retime`` times several kernels interleaved in one worker, under one device lock, and says how
fast each is relative to the first (``session.py``): what decides a win that separate evaluations
cannot tell from noise.

Ceilings are ceilings: before a kernel is called SUSPICIOUS for beating this machine's measured
ceiling, every ceiling is re-measured together (``Evaluator.remeasure``) and the kernel scored again
against the higher figures (docs/architecture.md, Contracts: Hardware).
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from functools import partial

from accelopt import settings
from accelopt.backends.base import get_backend
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.hardware import devicelock, drift
from accelopt.hardware.cache import BOUND_CEILINGS, Remeasure, describe_figure, remeasurer_for
from accelopt.hardware.measure import CEILINGS
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.config import Config as LLMConfig
from accelopt.llm.config import load_config
from accelopt.problems.records import Problem
from accelopt.problems.shipping import problem_ref
from accelopt.profiling import faults
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent import deadlines
from accelopt.profiling.parent.controls import spec_for
from accelopt.profiling.parent.deadlines import Deadlines
from accelopt.profiling.parent.environment import protect_parent, worker_env
from accelopt.profiling.parent.pool import WorkerPool
from accelopt.profiling.parent.scoring import (
    blames_the_ceiling,
    build_evaluation,
    control_figure,
    control_kind,
    workload_roofline,
)
from accelopt.profiling.parent.seeds import seed_pool
from accelopt.profiling.profiler import Job
from accelopt.profiling.session import Retiming, retiming
from accelopt.profiling.stats import MIN_ROUNDS
from accelopt.profiling.worker.protocol import (
    ControlSpec,
    EvaluateRequest,
    EvaluationAnswer,
    KernelResult,
    KernelSource,
    RetimeRequest,
    SessionAnswer,
)
from accelopt.redaction import secrets_to_redact

log = logging.getLogger(__name__)


class Evaluator(AbstractContextManager["Evaluator"]):
    """Evaluates kernels against ``hardware``'s roofline.

    ``remeasure`` re-measures every ceiling of ``hardware`` together when a kernel beats one: it
    is ``hardware.cache.raise_ceiling`` when ``hardware`` is this machine's measured and cached
    CPU spec (``load_cpu_spec``), and None (never re-measure) for datasheets, GPUs and ceilings
    fixed by hand, as tests pass; a test may set it. The machine is re-measured at most once in
    an Evaluator's life, whichever ceilings are beaten, so a cheat cannot have it measured again
    and again and the spec (its key) changes once; the raised ceilings replace ``hardware`` for
    the evaluations after it.
    """

    def __init__(self, hardware: HardwareSpec, config: EvalConfig | None = None) -> None:
        self.hardware = hardware
        self.remeasure: Remeasure | None = remeasurer_for(hardware)
        self._remeasurements: dict[str, str] = {}  # ceiling -> what its re-measurement found
        self._remeasure_lock = threading.Lock()
        self.config = config or EvalConfig()
        self.llm_config = _llm_config()  # read once, not at every scoring: the keys it names
        backend = get_backend(hardware.backend)
        backend.preflight(timing=not self.config.check_only)  # one clear UserError, now
        self.threads = self.config.threads or hardware.cores
        protect_parent()  # its environment holds the API keys
        env = worker_env(settings.environment(), self.threads)
        self.lock_path = devicelock.lock_path(backend.lock_name())
        self.pool = WorkerPool(
            self.config.workers, env, self.config.recycle_after, lock_path=self.lock_path
        )
        self.pool.prestart(self.config.workers)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.pool.close()

    def _seeds(self, problem: Problem, workload: str) -> list[int]:
        """The explicit base seed's run, else this machine's pool for the problem and workload
        (its references are computed once: worker/references.py)."""
        base = self.config.seed
        if base is None:
            pool = settings.cache_dir() / "references"
            return seed_pool(pool, problem.name, workload, self.config.seeds)
        return [base + i for i in range(self.config.seeds)]

    def control(self, problem: Problem, workload: str) -> ControlSpec | None:
        """The control the worker times with a kernel of ``problem``: the cpu backend's timings
        only (a GPU's would need its own)."""
        if not self.hardware.on_host or self.config.check_only:
            return None
        sizes = problem.workload(workload).sizes
        bound = workload_roofline(problem, workload, self.hardware).bound
        read = sum(t.nbytes(sizes) for t in problem.inputs)
        return spec_for(str(bound), read, sum(t.nbytes(sizes) for t in problem.outputs))

    def _request(
        self,
        kernel: Kernel,
        problem: Problem,
        workload: str,
        seeds: list[int],
        race_s: float | None = None,
    ) -> EvaluateRequest:
        return EvaluateRequest(
            kernel=KernelSource(source=kernel.source, name=kernel.name),
            backend=kernel.backend,
            problem=problem_ref(problem),
            workload=workload,
            config=self.config,
            seeds=seeds,
            threads=self.threads,
            llc_bytes=self.hardware.llc_bytes,
            lock_path=str(self.lock_path),
            control=self.control(problem, workload),
            race_s=race_s,
            drift=drift.machine_drift(),
        )

    def evaluate(
        self, kernel: Kernel, problem: Problem, workload: str, race_s: float | None = None
    ) -> Evaluation:
        """``race_s``: inside a search, the parent's latency (the upper end of its interval):
        timing stops early once the kernel is clearly slower (``Evaluation.raced``)."""
        start = time.perf_counter()
        job: Job = (kernel, problem, workload)
        hardware = self.hardware  # a raised ceiling may replace it meanwhile (_remeasured)
        peak_s = workload_roofline(problem, workload, hardware).peak_s  # scales the deadlines
        seeds = self._seeds(problem, workload)
        reason = get_backend(kernel.backend).check(kernel.source)
        if reason:
            result = KernelResult(status=Status.REJECTED, error=reason)
        else:
            request = self._request(kernel, problem, workload, seeds, race_s)
            result = self._asked(request, deadlines.for_evaluation(self.config, peak_s))
        return self._scored(job, hardware, result, seeds, time.perf_counter() - start)

    def _asked(self, request: EvaluateRequest, limits: Deadlines) -> KernelResult:
        """The worker's result; one the service failed (``faults.py``) is asked again, up to
        ``faults.ATTEMPTS`` in all, then says the evaluation could not be done."""
        for attempt in range(1, faults.ATTEMPTS + 1):
            answer = self.pool.ask(request, limits, self.config.output_cap_bytes)
            assert isinstance(answer, EvaluationAnswer)
            result = answer.result
            if not result.service or self.pool.closed:  # closed: the run stops, never retry
                return result
            log.warning(
                "evaluation attempt %d of %d failed: %s", attempt, faults.ATTEMPTS, result.service
            )
        error = faults.could_not(f"{result.service} ({faults.ATTEMPTS} attempts)")
        return result.model_copy(update={"error": error, "service": error})

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> Retiming:
        """``kernels`` (the first is the reference) checked as evaluations are, then timed
        interleaved in one worker under one device lock (``session.py``): a fresh evaluation of
        each (never cached) and each one's speed relative to the first. A kernel the static
        checks reject is REJECTED and left out of the session; a worker that dies takes them all.
        """
        _check_session(kernels, self.config)
        start = time.perf_counter()
        hardware = self.hardware
        peak_s = workload_roofline(problem, workload, hardware).peak_s  # scales the deadlines
        seeds = self._seeds(problem, workload)
        reasons = [get_backend(k.backend).check(k.source) for k in kernels]
        live = [k for k, reason in zip(kernels, reasons, strict=True) if not reason]
        answer = SessionAnswer(results=[], rounds=0, round_s=[])
        if live:
            request = self._retime_request(live, problem, workload, seeds)
            limits = deadlines.for_evaluation(self.config, peak_s)
            ran = self.pool.ask(request, limits, self.config.output_cap_bytes)
            assert isinstance(ran, SessionAnswer)
            answer = ran
        results, series = iter(answer.results), iter(answer.round_s)
        wall_s = time.perf_counter() - start
        evaluations: list[Evaluation] = []
        for kernel, reason in zip(kernels, reasons, strict=True):
            result = KernelResult(status=Status.REJECTED, error=reason) if reason else next(results)
            job: Job = (kernel, problem, workload)
            evaluations.append(self._scored(job, hardware, result, seeds, wall_s))
        timed = [[] if reason else next(series) for reason in reasons]
        return retiming(
            evaluations,
            timed,
            answer.rounds,
            answer.worker_pid,
            answer.clean_rounds,
            answer.disturbed,
        )

    def _retime_request(
        self, kernels: Sequence[Kernel], problem: Problem, workload: str, seeds: list[int]
    ) -> RetimeRequest:
        one = self._request(kernels[0], problem, workload, seeds)
        return RetimeRequest(
            **one.model_dump(exclude={"type", "kernel", "config"}),
            config=self.config,
            kernels=[KernelSource(source=k.source, name=k.name) for k in kernels],
            min_rounds=MIN_ROUNDS,
        )

    def _scored(
        self,
        job: Job,
        hardware: HardwareSpec,
        result: KernelResult,
        seeds: list[int],
        wall_s: float,
    ) -> Evaluation:
        """The evaluation of ``result`` against the job's roofline on ``hardware``; one SUSPICIOUS
        only for beating the roofline is scored again after the ceiling that bounds it is
        re-measured (the higher figure kept)."""
        control = self.control(job[1], job[2])
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        secrets = secrets_to_redact(settings.environment(), self.llm_config)
        build = partial(
            build_evaluation,
            job,
            threads=self.threads,
            result=result,
            seeds=seeds,
            wall_s=wall_s,
            secrets=secrets,
            drift=self._drift(control, result),
            control=control,
            headline=self.config.headline,
        )

        def score(spec: HardwareSpec) -> Evaluation:
            return build(spec).model_copy(update={"measured_at": stamp})

        evaluation = score(hardware)
        if not blames_the_ceiling(evaluation.status, evaluation.pct_of_peak):
            return evaluation
        hardware, found = self._remeasured(BOUND_CEILINGS[evaluation.bound], evaluation)
        if hardware.key() != evaluation.hardware:
            evaluation = score(hardware)
        if evaluation.status is Status.SUSPICIOUS and found:
            evaluation = evaluation.model_copy(update={"error": f"{evaluation.error} ({found})"})
        return evaluation

    def _drift(self, control: ControlSpec | None, result: KernelResult) -> float:
        """The machine's drift, this evaluation's control figure recorded first (so that an
        evaluation under a neighbour that just arrived widens its own interval)."""
        figure = control_figure(result)
        if control is not None and figure is not None:
            with contextlib.suppress(OSError):  # a read-only cache: what is recorded counts
                drift.record(control_kind(control), figure)
        return drift.machine_drift()

    def _remeasured(self, ceiling: str, evaluation: Evaluation) -> tuple[HardwareSpec, str]:
        """The hardware after the first beaten ceiling had every ceiling re-measured together
        (once per Evaluator, whichever ceiling is beaten later; others wait for it), and what the
        re-measurement found for ``ceiling``, for the verdict; ``self.hardware`` and "" without
        one."""
        with self._remeasure_lock:
            if self.remeasure is None:
                return self.hardware, ""
            if not self._remeasurements:
                self._remeasurements = self._remeasure(ceiling, evaluation)
            return self.hardware, self._remeasurements[ceiling]

    def _remeasure(self, ceiling: str, evaluation: Evaluation) -> dict[str, str]:
        """Every ceiling re-measured because ``evaluation`` beat ``ceiling``: per ceiling, what
        was found."""
        assert self.remeasure is not None
        before = self.hardware
        why = (
            f"{evaluation.problem} [{evaluation.workload}] kernel {evaluation.kernel} reached "
            f"{evaluation.pct_of_peak or 0:.0%} of peak, {evaluation.bound}-bound"
        )
        try:
            self.hardware = self.remeasure(self.hardware, ceiling, why)
        except (UserError, OSError, RuntimeError, ValueError, subprocess.SubprocessError) as exc:
            failed = {name: f"re-measuring every ceiling failed: {exc}" for name in CEILINGS}
            return {**failed, ceiling: f"re-measuring the {ceiling} ceiling failed: {exc}"}
        found = {}
        for name in CEILINGS:
            after = getattr(self.hardware, name)
            outcome = "raised to" if after > getattr(before, name) else "stays at"
            found[name] = (
                f"the {name} ceiling was re-measured and {outcome} {describe_figure(name, after)}"
            )
        return found


def _check_session(kernels: Sequence[Kernel], config: EvalConfig) -> None:
    if not kernels:
        raise ValueError("a re-timing session needs at least one kernel")
    if len({k.backend for k in kernels}) > 1:
        raise ValueError("a re-timing session times kernels of one backend, on one device")
    if config.check_only:
        raise UserError("re-timing measures speed: it cannot run with check_only")


def _llm_config() -> LLMConfig | None:
    """The default LLM config, whose API keys a kernel's log and error may not show
    (``redaction.py``, with the environment's, read at each scoring); None where it is unusable."""
    try:
        return load_config()
    except UserError:
        return None
