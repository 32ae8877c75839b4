"""Starting, resuming and finishing a run: the store, the client, the evaluator and the loop."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelopt.backends.base import get_backend
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.client import LLMClient, Usage
from accelopt.llm.config import AGENTS, Config
from accelopt.llm.preflight import check_endpoints
from accelopt.problems.loader import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.profiler import make_profiler
from accelopt.search.config import SearchConfig
from accelopt.search.loop import Optimizer
from accelopt.search.progress import Progress
from accelopt.search.selection import Candidate
from accelopt.store.records import RunRecord
from accelopt.store.store import Store


@dataclass(frozen=True)
class OptimizeResult:
    run: RunRecord
    status: str
    baseline: Candidate
    best: Candidate
    usage: dict[str, Usage]


@dataclass(frozen=True)
class RunInputs:
    """What a run needs besides its record: endpoints, device, evaluation settings."""

    llm: Config
    hardware: HardwareSpec
    eval_config: EvalConfig
    console: Console | None = None  # live progress when given
    check_llm: bool = True  # probe the endpoints before spending anything
    profiler: str = "local"  # local | ray
    ray_address: str | None = None


def new_run(
    store: Store, problem: str, workload: str, backend: str, hardware: HardwareSpec,
    search: SearchConfig, llm: Config, start_source: str | None = None,
) -> RunRecord:  # fmt: skip
    """Record a new run. ``start_source``: a kernel to start from instead of the baseline."""
    models = {agent: llm.endpoint(agent).model for agent in AGENTS}
    config: dict[str, Any] = {"search": search.model_dump(), "models": models}
    if start_source is not None:
        config["start_source"] = start_source
    run = RunRecord(
        id=uuid.uuid4().hex[:12],
        problem=problem,
        workload=workload,
        backend=backend,
        hardware=hardware.key(),
        strategy=search.strategy,
        config=config,
    )
    store.create_run(run)
    return run


def _client(store: Store, run: RunRecord, llm: Config, replay: bool) -> LLMClient:
    return LLMClient(llm, recorder=store.recorder(run.id), replay=replay)


async def _drive(optimizer: Optimizer, resume: bool) -> tuple[str, Candidate, Candidate]:
    store, run = optimizer.store, optimizer.run
    source = (
        run.config.get("start_source")
        or optimizer.problem.kernel_path("baseline", optimizer.backend.name).read_text()
    )
    baseline = await optimizer.admit(source, None, None, 0, "baseline")
    store.update_run(run.id, baseline_hash=baseline.hash)
    if not baseline.evaluation.passed:
        e = baseline.evaluation
        raise UserError(
            f"the starting kernel of {run.problem} does not pass: {e.status.value} {e.error}"
        )
    records = store.iterations(run.id) if resume else []
    if not records:
        optimizer.commit(0, [baseline], baseline)
        beam, start = [baseline], 1
    else:
        kernels = {k.hash: k for k in store.kernels(run.id)}
        evaluations = store.run_evaluations(run.id)
        last = records[-1]
        beam = [Candidate(kernels[h], evaluations[h]) for h in last.beam if h in evaluations]
        beam, start = beam or [baseline], last.iteration + 1
    status = await optimizer.optimize(baseline, beam, start)
    return status, baseline, committed_best(store, run.id) or baseline


def committed_best(store: Store, run_id: str) -> Candidate | None:
    """The run's best kernel as the loop committed it (noise-aware: a kernel within the noise of
    its parent never displaced it), with its evaluation."""
    run = store.get_run(run_id)
    kernels = {k.hash: k for k in store.kernels(run_id)}
    evaluations = store.run_evaluations(run_id)
    if run is None or run.best_hash not in kernels or run.best_hash not in evaluations:
        return None
    return Candidate(kernels[run.best_hash], evaluations[run.best_hash])


def execute_run(store: Store, run: RunRecord, inputs: RunInputs, resume: bool) -> OptimizeResult:
    """Run (or resume) ``run`` to its end; its status is committed whatever happens."""
    search = SearchConfig.model_validate(run.config["search"])
    problem = load_problem(run.problem)
    backend = get_backend(run.backend)
    client = _client(store, run, inputs.llm, replay=resume)
    if inputs.check_llm:
        asyncio.run(check_endpoints(list(client.endpoints.values())))
    progress = Progress(run.problem, search.iterations, console=inputs.console)
    store.update_run(run.id, status="running")
    status = "failed"
    try:
        # No store for the profiler: Optimizer.measure reads and writes the same cache itself.
        with make_profiler(
            inputs.profiler, inputs.hardware, inputs.eval_config, ray_address=inputs.ray_address
        ) as evaluator:
            optimizer = Optimizer(store, client, evaluator, backend, inputs.hardware, problem,
                                  run.workload, search, run, progress)  # fmt: skip
            progress.start()
            status, baseline, top = asyncio.run(_run_and_close(optimizer, resume))
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        progress.stop()
        store.update_run(run.id, status=status)
    final = store.get_run(run.id) or run
    return OptimizeResult(final, status, baseline, top, client.usage)


async def _run_and_close(optimizer: Optimizer, resume: bool) -> tuple[str, Candidate, Candidate]:
    try:
        return await _drive(optimizer, resume)
    finally:
        await optimizer.client.aclose()


def run_summary(result: OptimizeResult) -> dict[str, Any]:
    """The numbers the CLI prints and writes as JSON."""
    b, t = result.baseline.evaluation, result.best.evaluation
    speedup = (b.latency_s / t.latency_s) if b.latency_s and t.latency_s else None
    return {
        "run": result.run.id,
        "problem": result.run.problem,
        "workload": result.run.workload,
        "status": result.status,
        "baseline": {"latency_s": b.latency_s, "pct_of_peak": b.pct_of_peak, "hash": b.kernel_hash},
        "best": {"latency_s": t.latency_s, "pct_of_peak": t.pct_of_peak, "hash": t.kernel_hash},
        "speedup": speedup,
        "bound": t.bound,
        "usage": {agent: vars(u) for agent, u in result.usage.items()},
    }
