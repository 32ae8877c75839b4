"""The ``Evaluator``: static checks in the parent, everything else in the worker pool.

``evaluate`` never raises for a bad kernel: every outcome is an ``Evaluation`` with a status.

``retime`` times several kernels interleaved in one worker, under one device lock, and says how
fast each is relative to the first (``session.py``): what decides a win that separate evaluations
cannot tell from noise.

Ceilings are ceilings: before a kernel is called SUSPICIOUS for beating this machine's measured
ceiling, that ceiling is re-measured (``Evaluator.remeasure``) and the kernel scored again against
the higher figure (DESIGN.md, Hardware).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from accelopt import settings
from accelopt.backends.base import get_backend
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.hardware import devicelock
from accelopt.hardware.cache import BOUND_CEILINGS, Remeasure, describe_figure, remeasurer_for
from accelopt.hardware.roofline import roofline
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.config import load_config
from accelopt.problems.records import Problem
from accelopt.problems.shipping import problem_ref
from accelopt.profiling import sandbox
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.pool import Deadlines, WorkerPool
from accelopt.profiling.references import seed_pool
from accelopt.profiling.scoring import blames_the_ceiling, verdict
from accelopt.profiling.session import MIN_ROUNDS, Retiming, RoundSeries, retiming
from accelopt.redaction import redact, secrets_to_redact

Job = tuple[Kernel, Problem, str]


class Evaluator:
    """Evaluates kernels against ``hardware``'s roofline.

    ``remeasure`` re-measures one ceiling of ``hardware`` when a kernel beats it: it is
    ``hardware.cache.raise_ceiling`` when ``hardware`` is this machine's measured and cached CPU
    spec (``load_cpu_spec``), and None (never re-measure) for datasheets, GPUs and ceilings fixed
    by hand, as tests pass; a test may set it. Each ceiling is re-measured at most once in an
    Evaluator's life, so a cheat cannot have the machine measured again and again; a raised
    ceiling replaces ``hardware`` for the evaluations after it.
    """

    def __init__(self, hardware: HardwareSpec, config: EvalConfig | None = None) -> None:
        self.hardware = hardware
        self.remeasure: Remeasure | None = remeasurer_for(hardware)
        self._remeasurements: dict[str, str] = {}  # ceiling -> what its re-measurement found
        self._remeasure_lock = threading.Lock()
        self.config = config or EvalConfig()
        backend = get_backend(hardware.backend)
        backend.preflight(timing=not self.config.check_only)  # one clear UserError, now
        self.threads = self.config.threads or hardware.cores
        sandbox.protect_parent()  # its environment holds the API keys
        env = sandbox.worker_env(os.environ, self.threads)
        self.lock_path = devicelock.lock_path(backend.lock_name())
        self.pool = WorkerPool(
            self.config.workers, env, self.config.recycle_after, lock_path=self.lock_path
        )
        self.pool.prestart(self.config.workers)

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.pool.close()

    def _seeds(self, problem: Problem, workload: str) -> list[int]:
        """The explicit base seed's run, else this machine's pool for the problem and workload
        (its references are computed once: references.py)."""
        base = self.config.seed
        if base is None:
            pool = settings.cache_dir() / "references"
            return seed_pool(pool, problem.name, workload, self.config.seeds)
        return [base + i for i in range(self.config.seeds)]

    def _deadlines(self, peak_s: float) -> Deadlines:
        call_s = self.config.call_timeout_s(peak_s)
        return Deadlines(
            compile_s=self.config.compile_timeout_s + 30,
            call_s=call_s,
            reference_s=max(120.0, 1000 * peak_s),
            lock_s=self.config.lock_timeout_s,
            timing_factor=self.config.timing_call_factor,
            timing_floor_s=self.config.call_timeout_floor_s,
        )

    def _request(
        self, kernel: Kernel, problem: Problem, workload: str, seeds: list[int]
    ) -> dict[str, Any]:
        return {
            "type": "evaluate",
            "source": kernel.source,
            "backend": kernel.backend,
            "kernel_name": kernel.name,
            "problem": problem_ref(problem),
            "workload": workload,
            "config": self.config.model_dump(),
            "seeds": seeds,
            "threads": self.threads,
            "llc_bytes": self.hardware.llc_bytes,
            "lock_path": str(self.lock_path),
        }

    def evaluate(self, kernel: Kernel, problem: Problem, workload: str) -> Evaluation:
        start = time.perf_counter()
        sizes = problem.workload(workload).sizes
        roof = roofline(problem.cost.evaluate(sizes), self.hardware)
        seeds = self._seeds(problem, workload)
        reason = get_backend(kernel.backend).check(kernel.source)
        if reason:
            raw: dict[str, Any] = {"status": str(Status.REJECTED), "error": reason}
        else:
            request = self._request(kernel, problem, workload, seeds)
            raw = self.pool.run(request, self._deadlines(roof.peak_s), self.config.output_cap_bytes)
        wall_s = time.perf_counter() - start
        job: Job = (kernel, problem, workload)
        return self._scored(job, raw, seeds, wall_s)

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> Retiming:
        """``kernels`` (the first is the reference) checked as evaluations are, then timed
        interleaved in one worker under one device lock (``session.py``): a fresh evaluation of
        each (never cached) and each one's speed relative to the first. A kernel the static
        checks reject is REJECTED and left out of the session; a worker that dies takes them all.
        """
        _check_session(kernels, self.config)
        start = time.perf_counter()
        seeds = self._seeds(problem, workload)
        reasons = [get_backend(k.backend).check(k.source) for k in kernels]
        live = [k for k, reason in zip(kernels, reasons, strict=True) if not reason]
        raw: dict[str, Any] = {}
        if live:
            sizes = problem.workload(workload).sizes
            peak_s = roofline(problem.cost.evaluate(sizes), self.hardware).peak_s
            deadlines = self._deadlines(peak_s)
            request = self._retime_request(live, problem, workload, seeds)
            raw = self.pool.run(request, deadlines, self.config.output_cap_bytes)
        results, series = iter(_session_results(raw, len(live))), iter(_session_series(raw, live))
        wall_s = time.perf_counter() - start
        evaluations: list[Evaluation] = []
        timed: list[RoundSeries] = []
        for kernel, reason in zip(kernels, reasons, strict=True):
            rejected = {"status": str(Status.REJECTED), "error": reason}
            one = rejected if reason else next(results)
            evaluations.append(self._scored((kernel, problem, workload), one, seeds, wall_s))
            timed.append([] if reason else next(series))
        pid, rounds = raw.get("worker_pid"), raw.get("rounds")
        return retiming(
            evaluations,
            timed,
            rounds if isinstance(rounds, int) else 0,
            pid if isinstance(pid, int) else None,
        )

    def _retime_request(
        self, kernels: Sequence[Kernel], problem: Problem, workload: str, seeds: list[int]
    ) -> dict[str, Any]:
        request = self._request(kernels[0], problem, workload, seeds)
        del request["source"], request["kernel_name"]
        sources = [{"source": k.source, "kernel_name": k.name} for k in kernels]
        return {**request, "type": "retime", "kernels": sources, "min_rounds": MIN_ROUNDS}

    def _scored(self, job: Job, raw: dict[str, Any], seeds: list[int], wall_s: float) -> Evaluation:
        """The evaluation of ``raw``; one SUSPICIOUS only for beating the roofline is scored again
        after the ceiling that bounds it is re-measured (the higher figure kept)."""
        evaluation = build_evaluation(*job, self.hardware, self.threads, raw, seeds, wall_s)
        e = evaluation
        if not blames_the_ceiling(e.status, e.pct_of_peak):
            return evaluation
        hardware, found = self._remeasured(BOUND_CEILINGS[evaluation.bound], evaluation)
        if hardware.key() != evaluation.hardware:
            evaluation = build_evaluation(*job, hardware, self.threads, raw, seeds, wall_s)
        if evaluation.status is Status.SUSPICIOUS and found:
            evaluation = evaluation.model_copy(update={"error": f"{evaluation.error} ({found})"})
        return evaluation

    def _remeasured(self, ceiling: str, evaluation: Evaluation) -> tuple[HardwareSpec, str]:
        """The hardware with ``ceiling`` re-measured (once per Evaluator; others wait for it), and
        what the re-measurement found, for the verdict; ``self.hardware`` and "" without one."""
        with self._remeasure_lock:
            if self.remeasure is None:
                return self.hardware, ""
            if ceiling not in self._remeasurements:
                self._remeasurements[ceiling] = self._remeasure(ceiling, evaluation)
            return self.hardware, self._remeasurements[ceiling]

    def _remeasure(self, ceiling: str, evaluation: Evaluation) -> str:
        assert self.remeasure is not None
        before = getattr(self.hardware, ceiling)
        why = (
            f"{evaluation.problem} [{evaluation.workload}] kernel {evaluation.kernel} reached "
            f"{evaluation.pct_of_peak or 0:.0%} of peak, {evaluation.bound}-bound"
        )
        try:
            self.hardware = self.remeasure(self.hardware, ceiling, why)
        except (UserError, OSError, RuntimeError, ValueError, subprocess.SubprocessError) as exc:
            return f"re-measuring the {ceiling} ceiling failed: {exc}"
        after = getattr(self.hardware, ceiling)
        outcome = "raised to" if after > before else "stays at"
        return (
            f"the {ceiling} ceiling was re-measured and {outcome} {describe_figure(ceiling, after)}"
        )

    def evaluate_many(self, jobs: Iterable[Job]) -> Iterator[Evaluation]:
        """Evaluate in parallel across the pool; results come back in the order of ``jobs``."""
        with ThreadPoolExecutor(max_workers=self.config.workers) as executor:
            futures = [executor.submit(self.evaluate, *job) for job in jobs]
            for future in futures:
                yield future.result()


def _check_session(kernels: Sequence[Kernel], config: EvalConfig) -> None:
    if not kernels:
        raise ValueError("a re-timing session needs at least one kernel")
    if len({k.backend for k in kernels}) > 1:
        raise ValueError("a re-timing session times kernels of one backend, on one device")
    if config.check_only:
        raise UserError("re-timing measures speed: it cannot run with check_only")


def _list_of(value: Any, kind: type, count: int) -> bool:
    """Whether ``value`` (from a worker's answer) is a list of ``count`` ``kind``."""
    if not isinstance(value, list) or len(value) != count:
        return False
    return all(isinstance(v, kind) for v in value)


def _session_results(raw: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """Each kernel's raw result from a session's answer; the worker's failure (a crash, a
    timeout, a worker that could not start) for every kernel when it did not answer."""
    results = raw.get("results")
    if _list_of(results, dict, count):
        isolated = raw.get("network_isolated")
        return [{**r, "network_isolated": isolated} for r in results]
    if results is not None:  # an answer of the wrong shape: the worker is not to be believed
        raw = {"status": str(Status.CRASH), "error": "the worker answered a malformed session"}
    return [dict(raw) for _ in range(count)]


def _session_series(raw: dict[str, Any], kernels: Sequence[Kernel]) -> list[RoundSeries]:
    """Each timed kernel's round medians (empty where none came back)."""
    series = raw.get("round_s")
    if _list_of(series, list, len(kernels)):
        return [[x if isinstance(x, int | float) else None for x in s] for s in series]
    return [[] for _ in kernels]


def _secrets() -> tuple[str, ...]:
    """What a kernel's log and error may not show: the API keys of the environment and of the
    default config (``redaction.py``), read afresh (the environment may change)."""
    try:
        config = load_config()
    except UserError:
        config = None
    return secrets_to_redact(settings.environment(), config)


def build_evaluation(
    kernel: Kernel,
    problem: Problem,
    workload: str,
    hardware: HardwareSpec,
    threads: int,
    raw: dict[str, Any],
    seeds: list[int] | None = None,
    wall_s: float | None = None,
) -> Evaluation:
    """The ``Evaluation`` of a worker's raw result (or of a failure the service itself reports,
    e.g. ``{"status": "CRASH", "error": ...}``), scored against the roofline on ``hardware``."""
    roof = roofline(problem.cost.evaluate(problem.workload(workload).sizes), hardware)
    secrets = _secrets()
    judged = verdict(
        raw.get("status"),
        str(raw.get("error", "")),
        raw.get("latency_s"),
        roof.peak_s,
    )
    return Evaluation(
        problem=problem.name,
        workload=workload,
        backend=kernel.backend,
        problem_version=problem.fingerprint,
        kernel=kernel.name,
        kernel_hash=kernel.hash,
        hardware=hardware.key(),
        status=judged.status,
        error=redact(judged.error, secrets),
        latency_s=raw.get("latency_s"),
        min_s=raw.get("min_s"),
        noise=raw.get("noise"),
        calls=int(raw.get("calls") or 0),
        ci_low_s=raw.get("ci_low_s"),
        ci_high_s=raw.get("ci_high_s"),
        load_others=raw.get("load_others"),
        load_steal=raw.get("load_steal"),
        peak_s=roof.peak_s,
        pct_of_peak=judged.pct_of_peak,
        bound=roof.bound,
        max_rel_err=raw.get("max_rel_err"),
        tolerance=problem.tolerance,
        seeds=seeds or [],
        threads=threads,
        rotation_sets=raw.get("rotation_sets"),
        batch_calls=raw.get("batch_calls"),
        compile_s=raw.get("compile_s"),
        compile_cached=bool(raw.get("compile_cached")),
        check_s=raw.get("check_s"),
        time_s=raw.get("time_s"),
        wall_s=wall_s,
        network_isolated=raw.get("network_isolated"),
        isolation=raw.get("isolation"),
        log=redact(str(raw.get("log", "")), secrets),
    )
