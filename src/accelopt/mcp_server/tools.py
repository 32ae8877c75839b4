"""The tools of ``accelopt mcp`` as plain Python: an ``McpTools`` over one workspace.

A coding agent (Claude Code, Codex, Cursor...) writes the kernels itself; accelopt gives it what it
needs to optimize them honestly: the problems with their contract, sizes and roofline, an
evaluation against the reference and the hardware's ceilings, and the lessons of earlier runs.

Kernels are hostile code: they only ever run in the profiler's isolated workers, never in this
process. This process compiles a passing kernel once more, without running it, for the compiler's
vectorization remarks in its profile, as the search loop does for its planner. A Triton kernel is
Python: it is refused (``TRITON_REFUSED``) unless the operator set ``ACCELOPT_SERVE_TRITON=1``.

Each evaluation is recorded like a step of a run, so that ``accelopt runs list/show`` and
``accelopt report RUN`` cover agent sessions. Per session and per (problem, its fingerprint,
workload, backend) there is one ``RunRecord`` with strategy ``agent``, ``running`` while the
session lives and ``finished`` when it ends. The n-th kernel evaluated in it enters it at
iteration n: the first as the run's baseline, each later one with the kernel evaluated before it
as its parent. Each evaluation then commits iteration n, whose best is the fastest PASSED kernel
so far ($ spent: 0, accelopt calls no LLM here). The evaluations themselves are in the store's
evaluation cache (the profiler is made with the store), where ``Store.run_evaluations`` finds
them.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from accelopt import settings
from accelopt.backends.base import get_backend
from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import DEFAULT_BACKEND, hardware_backends, needs_serve_opt_in
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.loader import list_problems, load_problem
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.factory import make_profiler
from accelopt.profiling.profile import build_profile, render_profile
from accelopt.profiling.profiler import Profiler
from accelopt.search.evaluations import run_evaluations
from accelopt.search.spec import AgentSession, RunSpec
from accelopt.store.database import now_iso
from accelopt.store.records import IterationRecord, KernelOrigin, KernelRecord, RunRecord, RunStatus
from accelopt.store.store import Store
from accelopt.views import (
    hardware_for,
    problem_and_workload,
    problem_json,
    problem_show_json,
    unknown_backend,
)

log = logging.getLogger(__name__)

MAX_SOURCE_BYTES = 1 << 20  # a kernel source longer than this is refused (1 MiB)
MAX_LESSONS = 50  # search_memory's k, at most
STRATEGY = "agent"  # the strategy of the runs an agent session records
TRITON_REFUSED = (
    "this server does not run Triton kernels: a Triton kernel is Python, and until its "
    "containment has been proven on a GPU host serving it would let any client run code as the "
    "server's user; the operator can opt in with ACCELOPT_SERVE_TRITON=1"
)

HardwareFor = Callable[[str], HardwareSpec]
ProfilerFactory = Callable[[HardwareSpec, Store], Profiler]
RunKey = tuple[str, str, str, str]  # problem, its fingerprint, workload, backend


def local_profiler(hardware: HardwareSpec, store: Store) -> Profiler:
    """The profiler the server uses: this machine's isolated worker pool, one evaluation at a
    time, behind the workspace's evaluation cache."""
    return make_profiler("local", hardware, EvalConfig(workers=1), store=store)


def check_source(source: str) -> None:
    """A UserError when ``source`` is empty, not encodable as UTF-8, or over 1 MiB."""
    if not source.strip():
        raise UserError(
            "the kernel source is empty: pass the whole source of the kernel (a C file for "
            "backend cpu, a Python module for triton)"
        )
    try:
        size = len(source.encode("utf-8"))
    except UnicodeEncodeError:
        raise UserError(
            "the kernel source is not valid Unicode text (it holds a lone surrogate): pass it "
            "as UTF-8 text"
        ) from None
    if size > MAX_SOURCE_BYTES:
        raise UserError(
            f"the kernel source is {size:,} bytes, over the limit of {MAX_SOURCE_BYTES:,} bytes "
            "(1 MiB): pass a kernel source, not data"
        )


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float written as a string ("inf", "-inf", "nan"): JSON has
    no such numbers (an INCORRECT kernel's max_rel_err may be inf)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _faster(evaluation: Evaluation, best: Evaluation | None) -> bool:
    """Whether ``evaluation`` is a PASSED, timed kernel faster than ``best``."""
    if not evaluation.passed or evaluation.latency_s is None:
        return False
    return best is None or best.latency_s is None or evaluation.latency_s < best.latency_s


@dataclass
class AgentRun:
    """One run of the session: the kernels the agent evaluated on one problem and workload."""

    record: RunRecord
    evaluations: int = 0  # evaluations recorded, hence the last iteration committed
    last_hash: str = ""  # the kernel evaluated last: the next one's parent
    baseline: Evaluation | None = None  # the first kernel's evaluation
    best: Evaluation | None = None  # the fastest PASSED kernel so far
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class McpTools:
    """What one server process holds: the store, a profiler per backend (made when first needed,
    kept until ``close``), the ceilings per backend, and the runs it recorded. Thread-safe: the
    MCP server runs each tool call on a worker thread.

    ``hardware_for``, ``profiler_factory`` and ``remarks`` are seams for tests (fixed ceilings, a
    fake profiler, no compiler remarks)."""

    def __init__(
        self,
        workspace: Path,
        store: Store,
        *,
        hardware_for: HardwareFor = hardware_for,
        profiler_factory: ProfilerFactory = local_profiler,
        remarks: bool = True,
    ) -> None:
        self.workspace = workspace
        self.store = store
        self.id = uuid.uuid4().hex[:12]
        self.started_at = now_iso()
        self._hardware_for = hardware_for
        self._profiler_factory = profiler_factory
        self._remarks = remarks
        self._hardware: dict[str, HardwareSpec] = {}
        self._profilers: dict[str, Profiler] = {}
        self._runs: dict[RunKey, AgentRun] = {}
        self._devices = threading.RLock()  # ceilings and profilers
        self._runs_lock = threading.Lock()
        self._closed = False

    # -- devices ------------------------------------------------------------------------------

    def hardware(self, backend: str) -> HardwareSpec:
        """The ceilings kernels of ``backend`` are scored against (measured once for cpu when
        not cached yet); a UserError for an unknown backend."""
        with self._devices:
            if backend not in self._hardware:
                self._hardware[backend] = self._hardware_for(backend)
            return self._hardware[backend]

    def profiler(self, backend: str) -> Profiler:
        with self._devices:
            if self._closed:
                raise UserError("the accelopt MCP server is shutting down: start it again")
            if backend not in self._profilers:
                self._profilers[backend] = self._profiler_factory(
                    self.hardware(backend), self.store
                )
            return self._profilers[backend]

    # -- the tools ----------------------------------------------------------------------------

    def list_problems(self) -> list[dict[str, Any]]:
        """What ``accelopt bench list --json -`` prints: every problem, the suite's then the
        workspace's."""
        names = list_problems(self.workspace)
        return [json_safe(problem_json(load_problem(n, self.workspace))) for n in names]

    def show_problem(self, name: str, backend: str = DEFAULT_BACKEND) -> dict[str, Any]:
        """What ``accelopt bench show NAME --json -`` prints (contract, workloads with their cost
        and roofline, the baseline source), with the machine's ceilings (``machine``) and the
        backend's kernel contract as a prompt would show it (``backend_facts``)."""
        problem = load_problem(name, self.workspace)
        hardware = self.hardware(backend)
        payload = problem_show_json(problem, hardware, backend)
        payload["machine"] = hardware.model_dump(mode="json")
        payload["backend_facts"] = get_backend(backend).facts(hardware).render()
        return json_safe(payload)

    def evaluate_kernel(
        self, problem: str, source: str, workload: str = "cpu", backend: str = DEFAULT_BACKEND
    ) -> dict[str, Any]:
        """Check and time ``source`` in the profiler's sandboxed workers: the evaluation (as
        ``accelopt eval --json -`` prints it), its ``profile`` as text, and where it was
        recorded (``run``). A failing kernel is a result (its status and error), not an
        error."""
        if needs_serve_opt_in(backend) and not settings.serve_triton():
            raise UserError(TRITON_REFUSED)  # before anything is made or run
        check_source(source)
        prob = problem_and_workload(problem, workload, self.workspace)
        profiler = self.profiler(backend)
        kernel = Kernel(source, backend, STRATEGY)
        evaluation = profiler.evaluate(kernel, prob, workload)
        hardware = profiler.hardware
        step = self._record(prob, workload, backend, hardware, kernel, evaluation)
        profile = self._profile(prob, workload, backend, hardware, source, evaluation)
        log.info(
            "evaluated %s/%s (%s): %s, run %s iteration %s",
            prob.name,
            workload,
            backend,
            evaluation.status.value,
            step["id"],
            step["iteration"],
        )
        return json_safe(evaluation.model_dump(mode="json") | {"profile": profile, "run": step})

    def search_memory(
        self, query: str, k: int = 8, backend: str = DEFAULT_BACKEND
    ) -> list[dict[str, Any]]:
        """The lessons of the workspace's optimization memory that best match ``query``, as
        ``accelopt memory list --json -`` prints them, each with its ``relevance`` (higher is
        better)."""
        if backend not in hardware_backends():
            raise UserError(unknown_backend(backend))
        if k < 1:
            raise UserError(f"k must be at least 1 (lessons to return), not {k}")
        found = self.store.search_experiences(query, limit=min(k, MAX_LESSONS), backend=backend)
        return [json_safe(asdict(e) | {"relevance": score}) for e, score in found]

    # -- runs ---------------------------------------------------------------------------------

    def runs(self) -> list[RunRecord]:
        """The runs this session recorded, in the order they were started."""
        with self._runs_lock:
            return [r.record for r in self._runs.values()]

    def _agent_run(
        self, problem: Problem, workload: str, backend: str, hardware: HardwareSpec
    ) -> AgentRun:
        """The session's run of (problem, workload, backend), started when first needed."""
        key = (problem.name, problem.fingerprint, workload, backend)
        with self._runs_lock:
            if self._closed:
                raise UserError("the accelopt MCP server is shutting down: start it again")
            found = self._runs.get(key)
            if found is None:
                record = RunRecord(
                    id=uuid.uuid4().hex[:12],
                    problem=problem.name,
                    workload=workload,
                    backend=backend,
                    hardware=hardware.key(),
                    strategy=STRATEGY,
                    spec=self._run_spec(problem, hardware).to_json(),
                )
                self.store.create_run(record)
                found = self._runs[key] = AgentRun(record)
                log.info(
                    "recording %s/%s (%s) as run %s", problem.name, workload, backend, record.id
                )
            return found

    def _run_spec(self, problem: Problem, hardware: HardwareSpec) -> RunSpec:
        """What a run records besides its columns: no search parameters, models nor budget,
        since no LLM is called here; the session that recorded it."""
        session = AgentSession(session=self.id, pid=os.getpid(), started_at=self.started_at)
        return RunSpec(agent=session, hardware_spec=hardware, problem_version=problem.fingerprint)

    def _record(
        self,
        problem: Problem,
        workload: str,
        backend: str,
        hardware: HardwareSpec,
        kernel: Kernel,
        evaluation: Evaluation,
    ) -> dict[str, Any]:
        """Add the kernel to its run and commit the iteration; what the agent is told of it."""
        agent_run = self._agent_run(problem, workload, backend, hardware)
        run_id = agent_run.record.id
        with agent_run.lock:
            n = agent_run.evaluations + 1
            first = n == 1
            parent = "" if first or agent_run.last_hash == kernel.hash else agent_run.last_hash
            self.store.add_kernel(
                run_id,
                KernelRecord(
                    hash=kernel.hash,
                    source=kernel.source,
                    backend=backend,
                    iteration=n,
                    # the first kernel is the run's baseline, as the reports look it up
                    origin=KernelOrigin.BASELINE if first else KernelOrigin.AGENT,
                    parent_hash=parent,
                ),
            )
            if first:
                self.store.update_run(run_id, baseline_hash=kernel.hash)
                agent_run.baseline = evaluation
            new_best = _faster(evaluation, agent_run.best)
            if new_best:
                agent_run.best = evaluation
            best = agent_run.best
            agent_run.evaluations, agent_run.last_hash = n, kernel.hash
            self.store.commit_iteration(
                run_id,
                self._iteration(run_id, n, best),
                best_hash=best.kernel_hash if best else None,
            )
            base = agent_run.baseline
        return {
            "id": run_id,
            "iteration": n,
            "new_best": new_best,
            "best_hash": best.kernel_hash if best else "",
            "best_latency_s": best.latency_s if best else None,
            "best_pct_of_peak": best.pct_of_peak if best else None,
            "speedup_over_first": _speedup(base, evaluation),
        }

    def _iteration(self, run_id: str, n: int, best: Evaluation | None) -> IterationRecord:
        """Iteration ``n`` as the loop records one (``Optimizer.commit``): the beam is the best
        kernel alone, counts over the run's evaluations in the store."""
        evaluations = run_evaluations(self.store, run_id).values()
        failed = Counter(e.status.value for e in evaluations if not e.passed)
        return IterationRecord(
            iteration=n,
            beam=(best.kernel_hash,) if best else (),
            best_hash=best.kernel_hash if best else "",
            best_latency_s=best.latency_s if best else None,
            best_pct_of_peak=best.pct_of_peak if best else None,
            spent_usd=0.0,
            evaluated=len(evaluations),
            failed_by_status=dict(sorted(failed.items())),
        )

    def _profile(
        self,
        problem: Problem,
        workload: str,
        backend: str,
        hardware: HardwareSpec,
        source: str,
        evaluation: Evaluation,
    ) -> str:
        """The kernel's profile as the planner reads it: latency, roofline, each ceiling's
        utilization and, for a passing kernel, the compiler's vectorization remarks."""
        sizes = problem.workload(workload).sizes
        remarks: list[str] = []
        if self._remarks and evaluation.passed:
            try:
                remarks = get_backend(backend).remarks(source, problem, sizes)
            except Exception:  # a nicety: the evaluation is recorded already
                log.warning("no compiler remarks for %s", problem.name, exc_info=True)
        return render_profile(build_profile(evaluation, problem.cost.at(sizes), hardware, remarks))

    # -- the end ------------------------------------------------------------------------------

    def close(self, status: RunStatus = RunStatus.FINISHED) -> None:
        """End the session: its runs get ``status``, then the profilers stop. Later calls to
        ``close`` do nothing."""
        with self._runs_lock:
            if self._closed:
                return
            self._closed = True
            runs = list(self._runs.values())
        for agent_run in runs:
            self.store.update_run(agent_run.record.id, status=status)
        with self._devices:
            profilers, self._profilers = list(self._profilers.values()), {}
        for profiler in profilers:
            profiler.close()


def _speedup(base: Evaluation | None, evaluation: Evaluation) -> float | None:
    """The first kernel's latency over this one's, when both passed and were timed."""
    if base is None or not (base.passed and evaluation.passed):
        return None
    if not base.latency_s or not evaluation.latency_s:
        return None
    return base.latency_s / evaluation.latency_s
