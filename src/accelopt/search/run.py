"""Starting, resuming and finishing a run: the store, the client, the evaluator and the loop."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rich.console import Console

from accelopt.backends.base import get_backend
from accelopt.backends.registry import shipped_kernel
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.budget import Budget
from accelopt.llm.client import LLMClient, Usage
from accelopt.llm.config import AGENTS, BudgetConfig, Config
from accelopt.llm.offline import NoLLM
from accelopt.llm.preflight import check_endpoints
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.factory import make_profiler
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.search.children import DRAFT_SAMPLES
from accelopt.search.config import SearchConfig
from accelopt.search.context import RunContext
from accelopt.search.evaluations import run_evaluations
from accelopt.search.failing import EndpointFailedError
from accelopt.search.headline import Headline, stored_headline
from accelopt.search.interrupt import RunInterrupted, run_interruptible
from accelopt.search.loop import Optimizer
from accelopt.search.one_ceiling import re_measured_higher, rescore_run, rescored
from accelopt.search.phases import PhaseHook, Phases
from accelopt.search.progress import Progress
from accelopt.search.selection import Candidate
from accelopt.search.spec import RunSpec, run_hardware, run_problem
from accelopt.search.strategies import strategy_for
from accelopt.search.workloads import RunWorkloads, run_workloads
from accelopt.store.records import KernelOrigin, RunRecord, RunStatus
from accelopt.store.store import Store


@dataclass(frozen=True)
class OptimizeResult:
    run: RunRecord
    status: RunStatus
    baseline: Candidate
    best: Candidate
    usage: Mapping[str, Usage]  # this session's calls, per agent
    stopped: str = ""  # why the run stopped early, failed: its LLM endpoint failed every call
    references: tuple[Evaluation, ...] = ()  # what the run timed of NumPy and PyTorch
    headline: Headline | None = None  # the baseline and the best re-timed side by side at its end


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


@dataclass(frozen=True)
class RunTarget:
    """What a new run optimizes, and against which ceilings: ``problem`` on ``workload`` with
    ``backend``; ``version``: a workspace problem's fingerprint (its evaluations are cached
    under it); ``workloads``: those it tunes on (the first is ``workload``) and holds out, with
    each one's ``sizes`` (for reports that do not load the problem)."""

    problem: str
    workload: str
    backend: str
    hardware: HardwareSpec
    version: str = ""
    workloads: RunWorkloads | None = None
    sizes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def new_run(
    store: Store,
    target: RunTarget,
    search: SearchConfig,
    llm: Config,
    start_source: str | None = None,
    replay_from: Sequence[str] = (),
) -> RunRecord:
    """Record a new run of ``target``: everything a resume needs (the search, the models, the
    budget, the hardware spec it is scored against). ``start_source``: a kernel to start from
    instead of the baseline; ``replay_from``: runs whose recorded answers it may reuse for
    identical prompts."""
    sources = []
    for other in replay_from:
        found = store.get_run(other)
        if found is None:
            raise UserError(f"no run {other!r} to replay from: see `accelopt runs list`")
        sources.append(found.id)
    # a run whose strategy asks no model needs no endpoint, and records none
    asks = strategy_for(search.strategy).needs_llm
    models = {a: llm.endpoint(a).model for a in AGENTS} if asks else {}
    chosen = target.workloads if target.workloads is not None and target.workloads.several else None
    if chosen is not None and chosen.primary != target.workload:
        raise ValueError(f"the run's workload {target.workload} is not its first tuned one")
    sizes = target.sizes
    spec = RunSpec(
        search=search,
        models=models,
        budget=llm.budget,
        hardware_spec=target.hardware,
        replay_from=tuple(sources),
        start_source=start_source,
        problem_version=target.version,
        workloads=chosen.tuned if chosen else (),
        held_out=chosen.held_out if chosen else (),
        workload_sizes={w: dict(sizes.get(w, {})) for w in chosen.all} if chosen else {},
    )
    run = RunRecord(
        id=uuid.uuid4().hex[:12],
        problem=target.problem,
        workload=target.workload,
        backend=target.backend,
        hardware=target.hardware.key(),
        strategy=search.strategy,
        spec=spec.to_json(),
    )
    store.create_run(run)
    return run


def hardware_note(run: RunRecord, current: HardwareSpec) -> str:
    """What to tell a user resuming a run whose device's ceilings changed since, or ''."""
    recorded = RunSpec.of(run).hardware_spec
    if current.key() == run.hardware or recorded is None:
        return ""
    if re_measured_higher(recorded, current):
        return (
            f"this machine's ceilings were re-measured since run {run.id} started "
            f"({ceilings_text(recorded)} → {ceilings_text(current)}): the run moves to the new "
            "ones, its evaluations re-scored against them"
        )
    return (
        f"this machine's ceilings changed since run {run.id} started ({run.hardware} → "
        f"{current.key()}), and not only upwards; it goes on against the ceilings it started "
        "with, so that its figures stay comparable: start a new run to use the new ones"
    )


def ceilings_text(spec: HardwareSpec) -> str:
    return (
        f"{spec.matmul_rate / 1e9:.4g}/{spec.vector_rate / 1e9:.4g} GFLOP/s, "
        f"{spec.bandwidth / 1e9:.3g} GB/s"
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
    path = shipped_kernel(problem, "baseline", backend)
    return path.read_text() if path.is_file() else None


async def _baseline(optimizer: Optimizer) -> Candidate:
    """The run's first kernel, evaluated: its starting source, or one the executor writes
    from the reference (``ChildMaker.draft``)."""
    ctx = optimizer.context
    run = ctx.run
    source = starting_source(ctx.store, run, ctx.problem, ctx.backend.name)
    if source is not None:
        return await optimizer.measurer.admit(source, None, None, 0, KernelOrigin.BASELINE)
    drafted = await optimizer.maker.draft()
    if drafted is None and optimizer.calls.all_failed():
        raise EndpointFailedError(optimizer.calls.sentence("drafting a first kernel", run.id))
    if drafted is None:
        raise UserError(
            f"the executor wrote no passing first kernel for {run.problem} from its reference "
            f"({DRAFT_SAMPLES} attempts, each repaired by the fixer; `accelopt runs show "
            f"{run.id}` lists them): start from your own kernel with --kernel FILE"
        )
    return drafted


async def _drive(optimizer: Optimizer, resume: bool) -> tuple[RunStatus, Candidate, Candidate]:
    store, run = optimizer.context.store, optimizer.context.run
    baseline = await _baseline(optimizer)
    store.update_run(run.id, baseline_hash=baseline.hash)
    if not baseline.evaluation.passed:
        e = baseline.evaluation
        raise UserError(
            f"the starting kernel of {run.problem} does not pass: {e.status.value} {e.error}"
        )
    if optimizer.config.references and not store.references(run.id):  # once, its first session
        for reference in await optimizer.measurer.references():
            store.put_reference(run.id, reference)
    records = store.iterations(run.id) if resume else []
    if not records:
        optimizer.commit(0, [baseline], baseline)
        beam, overall, start = [baseline], baseline, 1
    else:
        kernels = {k.hash: k for k in store.kernels(run.id)}
        evaluations = run_evaluations(store, run)
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
    evaluations = run_evaluations(store, run_id)
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
    run, hardware = _scored_against(store, run, problem, inputs.hardware, resume)
    try:
        client = _client(store, run, search, inputs, resume)
    except BaseException:  # an endpoint that cannot be reached: a new run never ran, say so
        if not resume:
            store.update_run(run.id, status=RunStatus.FAILED)
        raise
    progress = Progress(run.problem, search.iterations, console=inputs.console)
    store.update_run(run.id, status=RunStatus.RUNNING)
    status = RunStatus.FAILED
    ended_with = hardware  # the spec the profiler ends with: a ceiling may be raised meanwhile
    completed = False
    try:
        with _profiler(store, inputs, hardware) as profiler:
            phase = Phases(inputs.on_phase, progress)
            workloads = run_workloads(run)
            context = RunContext(store, run, problem, backend, hardware, workloads, phase, progress)
            optimizer = Optimizer(context, client, profiler, search)
            progress.start()
            try:
                status, baseline, top = run_interruptible(
                    lambda: _run_and_close(optimizer, resume), _say_stderr, run.id
                )
                completed = True
            finally:
                ended_with = profiler.hardware
    except KeyboardInterrupt as exc:
        status = RunStatus.INTERRUPTED
        if isinstance(exc, RunInterrupted):
            raise
        raise RunInterrupted(run.id) from exc
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
        baseline, top = rescored(store, final, baseline), rescored(store, final, top)
    usage = {agent: dataclasses.replace(u) for agent, u in client.usage.items()}  # a snapshot
    headline = stored_headline(store, final, run_workloads(final).tuned) if completed else None
    stopped, references = optimizer.stopped, tuple(store.references(run.id))
    return OptimizeResult(final, status, baseline, top, usage, stopped, references, headline)


def _profiler(store: Store, inputs: RunInputs, hardware: HardwareSpec) -> CachedProfiler:
    """The run's profiler (``inputs.profiler``: local or ray), scoring against ``hardware``."""
    kind, config, address = inputs.profiler, inputs.eval_config, inputs.ray_address
    return make_profiler(kind, hardware, config, ray_address=address, store=store)


def _scored_against(
    store: Store, run: RunRecord, problem: Problem, current: HardwareSpec, resume: bool
) -> tuple[RunRecord, HardwareSpec]:
    """The run and the ceilings it is scored against: its own, or this machine's where a resume
    finds them re-measured higher (a run is not pinned to a figure measured while busy)."""
    hardware = run_hardware(run, current)
    if resume and re_measured_higher(hardware, current):
        run = rescore_run(store, run, problem, current)
        hardware = run_hardware(run, current)
    return run, hardware


def _client(
    store: Store, run: RunRecord, search: SearchConfig, inputs: RunInputs, resume: bool
) -> LLMClient | NoLLM:
    """The run's LLM client, its endpoints probed (``check_llm``); none for a strategy that
    asks no model (autotune)."""
    if not strategy_for(search.strategy).needs_llm:
        return NoLLM()
    if resume:
        check_models(run, inputs.llm)
    budget = inputs.budget or run_budget(store, run, fallback=inputs.llm)
    recorder = store.recorder(run.id, RunSpec.of(run).replay_from)
    client = LLMClient(inputs.llm, recorder=recorder, replay=True, budget=budget)
    if inputs.check_llm:
        asyncio.run(check_endpoints(list(client.endpoints.values())))
    return client


def _say_stderr(text: str) -> None:
    Console(stderr=True, highlight=False).print(text, markup=False, soft_wrap=True)


async def _run_and_close(
    optimizer: Optimizer, resume: bool
) -> tuple[RunStatus, Candidate, Candidate]:
    try:
        return await _drive(optimizer, resume)
    finally:
        await optimizer.client.aclose()
