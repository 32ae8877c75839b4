"""Starting, resuming and finishing a run: the store, the client, the evaluator and the loop."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelopt.backends.base import get_backend
from accelopt.errors import UserError
from accelopt.hardware.roofline import Bound
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.budget import Budget
from accelopt.llm.client import LLMClient, Usage
from accelopt.llm.config import AGENTS, BudgetConfig, Config
from accelopt.llm.offline import NoLLM
from accelopt.llm.preflight import check_endpoints
from accelopt.problems.loader import load_problem
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.factory import make_profiler
from accelopt.profiling.parent.rescoring import lowers_a_ceiling, rescore_all
from accelopt.search.config import SearchConfig
from accelopt.search.loop import DRAFT_SAMPLES, Optimizer, PhaseHook
from accelopt.search.progress import Progress
from accelopt.search.selection import Candidate
from accelopt.search.spec import RunSpec
from accelopt.search.workloads import Generalization, RunWorkloads, run_workloads
from accelopt.store.records import KernelOrigin, RunRecord, RunStatus
from accelopt.store.store import Store, usage_json


@dataclass(frozen=True)
class OptimizeResult:
    run: RunRecord
    status: RunStatus
    baseline: Candidate
    best: Candidate
    usage: Mapping[str, Usage]  # this session's calls, per agent


@dataclass(frozen=True)
class RunInputs:
    """What a run needs besides its record: endpoints, device, evaluation settings."""

    llm: Config
    hardware: HardwareSpec  # this machine's ceilings now (a resumed run keeps its recorded ones)
    eval_config: EvalConfig
    console: Console | None = None  # live progress when given
    check_llm: bool = True  # probe the endpoints before spending anything
    profiler: str = "local"  # local | ray
    ray_address: str | None = None
    budget: Budget | None = None  # shared by the runs of one --suite; default: the run's own
    on_phase: PhaseHook | None = None  # told each step of the loop as it starts


def new_run(
    store: Store, problem: str, workload: str, backend: str, hardware: HardwareSpec,
    search: SearchConfig, llm: Config, start_source: str | None = None,
    replay_from: Sequence[str] = (), problem_version: str = "",
    workloads: RunWorkloads | None = None, sizes: Mapping[str, Mapping[str, int]] | None = None,
) -> RunRecord:  # fmt: skip
    """Record a new run: everything a resume needs (the search, the models, the budget, the
    hardware spec it is scored against). ``start_source``: a kernel to start from instead of the
    baseline; ``replay_from``: runs whose recorded answers it may reuse for identical prompts;
    ``problem_version``: a workspace problem's fingerprint (its evaluations are cached under
    it); ``workloads``: those it tunes on (the first is ``workload``) and holds out, with each
    one's ``sizes`` (for reports that do not load the problem)."""
    sources = []
    for other in replay_from:
        found = store.get_run(other)
        if found is None:
            raise UserError(f"no run {other!r} to replay from: see `accelopt runs list`")
        sources.append(found.id)
    # an autotune run asks no model: it needs no endpoint, and records none
    models = {} if search.strategy == "autotune" else {a: llm.endpoint(a).model for a in AGENTS}
    chosen = workloads if workloads is not None and workloads.several else None
    if chosen is not None and chosen.primary != workload:
        raise ValueError(f"the run's workload {workload} is not its first tuned one")
    spec = RunSpec(
        search=search, models=models, budget=llm.budget, hardware_spec=hardware,
        replay_from=tuple(sources), start_source=start_source, problem_version=problem_version,
        workloads=chosen.tuned if chosen else (), held_out=chosen.held_out if chosen else (),
        workload_sizes={w: dict((sizes or {}).get(w, {})) for w in chosen.all} if chosen else {},
    )  # fmt: skip
    run = RunRecord(
        id=uuid.uuid4().hex[:12],
        problem=problem,
        workload=workload,
        backend=backend,
        hardware=hardware.key(),
        strategy=search.strategy,
        spec=spec.to_json(),
    )
    store.create_run(run)
    return run


def run_problem(store: Store, run: RunRecord) -> Problem:
    """The run's problem, from the suite or the store's workspace, as it was when the run
    started: an edited workspace problem would mix measurements of two problems in one run."""
    problem = load_problem(run.problem, store.path.parent)
    recorded = RunSpec.of(run).problem_version
    if problem.fingerprint != recorded:
        raise UserError(
            f"problem {run.problem} changed since run {run.id} started (its files' fingerprint "
            f"is {problem.fingerprint or 'none'}, was {recorded or 'none'}): a run measures one "
            f"problem; start a new run (accelopt optimize {run.problem} --kernel FILE goes on "
            "from its best kernel)"
        )
    return problem


def run_hardware(run: RunRecord, current: HardwareSpec) -> HardwareSpec:
    """The ceilings the run is scored against: those recorded when it started (evaluations are
    cached under their key, the committed best among them), even if this machine's changed."""
    recorded = RunSpec.of(run).hardware_spec
    if recorded is not None and recorded.key() == run.hardware:
        return recorded
    if current.key() == run.hardware:
        return current
    raise UserError(
        f"run {run.id} was scored against the ceilings {run.hardware}, which this machine no "
        f"longer has and the run did not record; start a new run (accelopt optimize "
        f"{run.problem} --kernel FILE to go on from its best kernel)"
    )


def hardware_note(run: RunRecord, current: HardwareSpec) -> str:
    """What to tell a user resuming a run whose device's ceilings changed since, or ''."""
    if current.key() == run.hardware:
        return ""
    return (
        f"this machine's ceilings changed since run {run.id} started ({run.hardware} → "
        f"{current.key()}); it goes on against the ceilings it started with, so that its "
        "figures stay comparable: start a new run to use the new ones"
    )


def check_models(run: RunRecord, llm: Config) -> None:
    """A resume asks the models the run was started with: replies are replayed by prompt and
    model, so another model would pay again for every answer already recorded."""
    recorded = RunSpec.of(run).models
    now = {agent: llm.endpoint(agent).model for agent in AGENTS}
    changed = [a for a in AGENTS if recorded.get(a) not in (None, now[a])]
    if changed:
        was = ", ".join(f"{a} {recorded[a]!r}" for a in changed)
        new = ", ".join(f"{a} {now[a]!r}" for a in changed)
        raise UserError(
            f"run {run.id} was made with {was} but the config now names {new}; point --config "
            "at the configuration the run started with, or start a new run"
        )


def run_budget(
    store: Store, run: RunRecord, max_usd: float | None = None, fallback: Config | None = None
) -> Budget:
    """The run's budget as recorded (``max_usd`` replaces its dollars when given; a run recorded
    before budgets were, ``fallback``'s), with what every earlier session of the run spent
    already counted."""
    limits = RunSpec.of(run).budget or (fallback.budget if fallback else BudgetConfig())
    spent = store.spent([run.id])
    return Budget(
        max_usd=max_usd if max_usd is not None else limits.max_usd,
        max_tokens=limits.max_tokens,
        spent_usd=spent.usd,
        spent_tokens=spent.tokens,
        unknown_cost_calls=spent.unknown_cost_calls,
    )


def starting_source(store: Store, run: RunRecord, problem: Problem, backend: str) -> str | None:
    """The kernel a run starts from: the one it recorded as its baseline, else the user's
    (--kernel), else the problem's baseline; None when there is none (one is drafted)."""
    if run.baseline_hash:
        for record in store.kernels(run.id):
            if record.hash == run.baseline_hash:
                return record.source
    start = RunSpec.of(run).start_source
    if start:
        return start
    path = problem.kernel_path("baseline", backend)
    return path.read_text() if path.is_file() else None


async def _baseline(optimizer: Optimizer) -> Candidate:
    """The run's first kernel, evaluated: its starting source, or one the executor writes
    from the reference (``Optimizer.draft``)."""
    store, run = optimizer.store, optimizer.run
    source = starting_source(store, run, optimizer.problem, optimizer.backend.name)
    if source is not None:
        return await optimizer.admit(source, None, None, 0, KernelOrigin.BASELINE)
    drafted = await optimizer.draft()
    if drafted is None:
        raise UserError(
            f"the executor wrote no passing first kernel for {run.problem} from its reference "
            f"({DRAFT_SAMPLES} attempts, each repaired by the fixer; `accelopt runs show "
            f"{run.id}` lists them): start from your own kernel with --kernel FILE"
        )
    return drafted


async def _drive(optimizer: Optimizer, resume: bool) -> tuple[RunStatus, Candidate, Candidate]:
    store, run = optimizer.store, optimizer.run
    baseline = await _baseline(optimizer)
    store.update_run(run.id, baseline_hash=baseline.hash)
    if not baseline.evaluation.passed:
        e = baseline.evaluation
        raise UserError(
            f"the starting kernel of {run.problem} does not pass: {e.status.value} {e.error}"
        )
    records = store.iterations(run.id) if resume else []
    if not records:
        optimizer.commit(0, [baseline], baseline)
        beam, overall, start = [baseline], baseline, 1
    else:
        kernels = {k.hash: k for k in store.kernels(run.id)}
        evaluations = store.run_evaluations(run.id)
        last = records[-1]
        beam = [Candidate(kernels[h], evaluations[h]) for h in last.beam if h in evaluations]
        beam, start = beam or [baseline], last.iteration + 1
        overall = committed_best(store, run.id) or baseline
    status = await optimizer.optimize(baseline, beam, overall, start)
    return status, baseline, committed_best(store, run.id) or baseline


def committed_best(store: Store, run_id: str) -> Candidate | None:
    """The run's best kernel as the loop committed it (noise-aware: a kernel within the noise of
    the best so far never displaced it), with its evaluation."""
    run = store.get_run(run_id)
    kernels = {k.hash: k for k in store.kernels(run_id)}
    evaluations = store.run_evaluations(run_id)
    if run is None or run.best_hash not in kernels or run.best_hash not in evaluations:
        return None
    return Candidate(kernels[run.best_hash], evaluations[run.best_hash])


def execute_run(store: Store, run: RunRecord, inputs: RunInputs, resume: bool) -> OptimizeResult:
    """Run (or resume) ``run`` to its end; its status is committed whatever happens. Everything
    is taken from the run's record: problem, workload, backend, search settings, the hardware
    spec it is scored against, its budget, and the runs it may replay from."""
    search = RunSpec.of(run).search
    if search is None:
        raise UserError(f"run {run.id} is an `accelopt mcp` session, not a search: it has no loop")
    problem = run_problem(store, run)
    backend = get_backend(run.backend)
    hardware = run_hardware(run, inputs.hardware)
    client = _client(store, run, search, inputs, resume)
    progress = Progress(run.problem, search.iterations, console=inputs.console)
    store.update_run(run.id, status=RunStatus.RUNNING)
    status = RunStatus.FAILED
    ended_with = hardware  # the spec the profiler ends with: a ceiling may be raised meanwhile
    completed = False
    try:
        with make_profiler(
            inputs.profiler, hardware, inputs.eval_config, ray_address=inputs.ray_address,
            store=store,
        ) as profiler:  # fmt: skip
            chosen = run_workloads(run)
            optimizer = Optimizer(store, client, profiler, backend, hardware, problem,
                                  run.workload, search, run, progress, inputs.on_phase,
                                  chosen.tuned, chosen.held_out)  # fmt: skip
            progress.start()
            try:
                status, baseline, top = asyncio.run(_run_and_close(optimizer, resume))
                completed = True
            finally:
                ended_with = profiler.hardware
    except KeyboardInterrupt:
        status = RunStatus.INTERRUPTED
        raise
    finally:
        progress.stop()
        store.update_run(run.id, status=status)
        if ended_with.key() != hardware.key():  # a run stopped early too: one ceiling in it
            try:
                rescore_run(store, store.get_run(run.id) or run, problem, ended_with)
            except Exception:
                if completed:  # else best effort: the error that stops the run is the one to tell
                    raise
    final = store.get_run(run.id) or run
    if final.hardware != hardware.key():
        baseline, top = _rescored(store, final, baseline), _rescored(store, final, top)
    usage = {agent: dataclasses.replace(u) for agent, u in client.usage.items()}  # a snapshot
    return OptimizeResult(final, status, baseline, top, usage)


def rescore_run(
    store: Store, run: RunRecord, problem: Problem, hardware: HardwareSpec
) -> RunRecord:
    """One run is scored against one ceiling: where a ceiling a kernel beat was raised during
    the run (``Evaluator``), the run's evaluations on each of its workloads are re-scored
    against ``hardware``, the spec it ended with (``profiling.parent.rescoring``), and the run
    moved onto it in the store (``Store.rescore_run``: its evaluations, its hardware and
    recorded spec, its iterations' best % of peak). Nothing changes when every evaluation is
    against ``hardware`` already, or when ``hardware`` is below a ceiling one was scored against
    (a raise the profiler did not see: the ray profiler's actors). The run as it is now."""
    found = [
        e
        for workload in run_workloads(run).all
        for e in store.run_evaluations(run.id, workload=workload).values()
    ]
    key = hardware.key()
    if run.hardware == key and all(e.hardware == key for e in found):
        return run
    rescored = rescore_all(found, {problem.name: problem}, hardware)
    if lowers_a_ceiling(found, rescored):
        return run
    store.rescore_run(run.id, hardware, rescored)
    return store.get_run(run.id) or run


def rescore_stored_run(store: Store, run: RunRecord, hardware: HardwareSpec | None) -> RunRecord:
    """A run whose stored evaluations are against several ceilings of its device (a session
    stopped before ``rescore_run`` at its end, or one recorded before runs were re-scored) moved
    onto ``hardware`` (this machine's spec now, which keeps a raised ceiling) where that is one
    of the specs they were scored against: what ``accelopt report`` shows. Unchanged otherwise,
    and while the run is running (its session re-scores it at its end)."""
    if hardware is None or run.status is RunStatus.RUNNING:
        return run
    keys = {
        e.hardware
        for workload in run_workloads(run).all
        for e in store.run_evaluations(run.id, workload=workload).values()
    }
    if len(keys | {run.hardware}) <= 1 or hardware.key() not in keys:
        return run
    try:
        problem = run_problem(store, run)
    except (UserError, LookupError):  # the problem changed or is gone: leave the figures as stored
        return run
    return rescore_run(store, run, problem, hardware)


def _rescored(store: Store, run: RunRecord, candidate: Candidate) -> Candidate:
    """``candidate`` with its evaluation as the store now holds it (re-scored by
    ``rescore_run``; unchanged when the store has none)."""
    evaluation = store.run_evaluations(run.id).get(candidate.hash)
    if evaluation is None or evaluation.hardware == candidate.evaluation.hardware:
        return candidate
    return Candidate(candidate.kernel, evaluation)


def _client(
    store: Store, run: RunRecord, search: SearchConfig, inputs: RunInputs, resume: bool
) -> LLMClient | NoLLM:
    """The run's LLM client, its endpoints probed (``check_llm``); none for an autotune run."""
    if search.strategy == "autotune":
        return NoLLM()
    if resume:
        check_models(run, inputs.llm)
    budget = inputs.budget or run_budget(store, run, fallback=inputs.llm)
    recorder = store.recorder(run.id, RunSpec.of(run).replay_from)
    client = LLMClient(inputs.llm, recorder=recorder, replay=True, budget=budget)
    if inputs.check_llm:
        asyncio.run(check_endpoints(list(client.endpoints.values())))
    return client


async def _run_and_close(
    optimizer: Optimizer, resume: bool
) -> tuple[RunStatus, Candidate, Candidate]:
    try:
        return await _drive(optimizer, resume)
    finally:
        await optimizer.client.aclose()


@dataclass(frozen=True)
class KernelSummary:
    """The baseline or the best kernel of a ``RunSummary``."""

    latency_s: float | None
    pct_of_peak: float | None
    hash: str


@dataclass(frozen=True)
class RunSummary:
    """The numbers the CLI prints of a run that ended, and writes as JSON (``as_json``)."""

    run: str
    problem: str
    workload: str
    workloads: tuple[str, ...]  # tuned on (the first is ``workload``)
    held_out: tuple[str, ...]
    status: RunStatus
    baseline: KernelSummary
    best: KernelSummary
    speedup: float | None  # the baseline's latency over the best's
    bound: Bound  # the best kernel's
    usage: Mapping[str, Usage]  # per agent
    best_kernel_path: str = ""  # where the best kernel was written ("": nowhere)
    generalization: Generalization | None = None  # figures per workload, for a run on several

    def as_json(self) -> dict[str, Any]:
        """The JSON object: every field, the usage as its counts; the kernel path and the
        generalization only when there are."""
        data: dict[str, Any] = {
            "run": self.run,
            "problem": self.problem,
            "workload": self.workload,
            "workloads": list(self.workloads),
            "held_out": list(self.held_out),
            "status": self.status,
            "baseline": dataclasses.asdict(self.baseline),
            "best": dataclasses.asdict(self.best),
            "speedup": self.speedup,
            "bound": self.bound,
            "usage": {agent: usage_json(u) for agent, u in self.usage.items()},
        }
        if self.best_kernel_path:
            data["best_kernel_path"] = self.best_kernel_path
        if self.generalization is not None:
            data["generalization"] = self.generalization.as_json()
        return data


def run_summary(result: OptimizeResult) -> RunSummary:
    """The summary of a run that ended, with this session's usage."""
    b, t = result.baseline.evaluation, result.best.evaluation
    speedup = (b.latency_s / t.latency_s) if b.latency_s and t.latency_s else None
    chosen = run_workloads(result.run)
    return RunSummary(
        run=result.run.id,
        problem=result.run.problem,
        workload=result.run.workload,
        workloads=chosen.tuned,
        held_out=chosen.held_out,
        status=result.status,
        baseline=KernelSummary(b.latency_s, b.pct_of_peak, b.kernel_hash),
        best=KernelSummary(t.latency_s, t.pct_of_peak, t.kernel_hash),
        speedup=speedup,
        bound=t.bound,
        usage=result.usage,
    )
