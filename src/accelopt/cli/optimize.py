"""``accelopt optimize``: run the search on one problem, several, or the whole suite.

Exit codes: those of every command (0, 2 for a usage error), and ENDPOINT_FAILED_EXIT when a run
stopped because its LLM endpoint failed every call of a step (``search.failing``): the sentence
says which agent, endpoint and error; the run is recorded failed, and resumable.
"""

from __future__ import annotations

import shlex
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from accelopt import views
from accelopt.backends.kernel import source_suffix
from accelopt.cli import common
from accelopt.cli import export as export_cli
from accelopt.cli import variants as variants_cli
from accelopt.cli.generalization import generalization_table, workload_peaks
from accelopt.cli.groups import with_groups
from accelopt.cli.one_ceiling import RunCeiling, run_ceiling
from accelopt.cli.optimize_options import Measuring, Outputs, SearchOptions, Spending, Targets
from accelopt.cli.output import (
    console,
    err_console,
    shows_table,
    write_json,
)
from accelopt.cli.run_tables import result_table, suite_results_table
from accelopt.errors import UserError
from accelopt.formatting import speedup_x, usd_plain
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.budget import Budget
from accelopt.llm.client import Usage
from accelopt.llm.config import Config
from accelopt.problems.loader import suite_names
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.config import SearchConfig
from accelopt.search.failing import EndpointFailedError
from accelopt.search.interrupt import RunInterrupted
from accelopt.search.run import (
    OptimizeResult,
    RunInputs,
    RunTarget,
    execute_run,
    hardware_note,
    new_run,
    run_budget,
)
from accelopt.search.spec import RunSpec, run_problem
from accelopt.search.strategies import STRATEGIES, strategy_for
from accelopt.search.summary import RunSummary, run_summary
from accelopt.search.workloads import (
    RunWorkloads,
    choose_workloads,
    generalization,
    run_workloads,
    workload_name,
)
from accelopt.store.errors import StoreError
from accelopt.store.records import RunRecord
from accelopt.store.store import Store

WorkspaceOption = common.WorkspaceOption
ENDPOINT_FAILED_EXIT = 3  # a run stopped because its LLM endpoint failed every call of a step


def open_store(workspace: Path | None) -> Store:
    """The store of the workspace; a UserError when the workspace or its database is unusable."""
    path = common.workspace_dir(workspace)
    try:
        return Store.open(path)
    except UserError:  # e.g. a database of a newer accelopt: its sentence says what to do
        raise
    except (OSError, sqlite3.Error, StoreError) as exc:
        raise UserError(
            f"cannot open the run store in {str(path)!r} ({exc}): give another directory with "
            "--workspace"
        ) from None


@with_groups
def optimize_command(
    targets: Targets,
    search: SearchOptions,
    spending: Spending,
    measuring: Measuring,
    timing: common.Timing,
    outputs: Outputs,
    workspace: WorkspaceOption = None,
) -> None:
    """Make a kernel faster: beam search with LLM agents, measured against the roofline."""
    targets.check(spending.replay_from)
    common.run_workspace(workspace)  # told before any work: a bad workspace, or one without room
    llm = spending.llm()
    eval_config = timing.config(measuring.workers)
    show = shows_table(outputs.json_path)
    with open_store(workspace) as store:
        try:
            if targets.resume:
                results = [_resume(store, targets, spending, measuring, llm, eval_config, show)]
            else:
                results = _start(
                    store,
                    targets,
                    search.config(),
                    spending,
                    measuring,
                    llm,
                    eval_config,
                    workspace,
                    show,
                )
        except EndpointFailedError as exc:
            _endpoint_failed(str(exc))
        except RunInterrupted as exc:
            _interrupted(exc.run_id, workspace)
        several = len(results) > 1
        finished = [_finish(store, r, None if several else outputs.out, show) for r in results]
        summaries = [summary for summary, _ in finished]
        if show and several:
            console.print(suite_results_table(finished, run_spec(results[0].run)))
    if outputs.export is not None:
        _export(results, outputs.export, workspace, show)
    payload = [s.as_json() for s in summaries]
    write_json(outputs.json_path, payload if len(payload) > 1 else payload[0])
    for stopped in [r.stopped for r in results if r.stopped]:
        _endpoint_failed(stopped)


def _endpoint_failed(sentence: str) -> NoReturn:
    """Say why the run stopped (its endpoint failed), and exit with ENDPOINT_FAILED_EXIT."""
    err_console.print(f"[red]error:[/red] {escape(sentence)}", highlight=False)
    raise typer.Exit(ENDPOINT_FAILED_EXIT)


def _interrupted(run_id: str, workspace: Path | None) -> NoReturn:
    """Say that the run stopped, that nothing measured is lost, and how to resume it; exit 130
    (the shell's code for Ctrl-C)."""
    where = f" --workspace {shlex.quote(str(workspace))}" if workspace is not None else ""
    err_console.print(
        f"interrupted: run {run_id} stopped; what it measured and paid for is kept. "
        f"Resume it with: accelopt optimize --resume {run_id}{where}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    raise typer.Exit(130)


def _resume(
    store: Store,
    targets: Targets,
    spending: Spending,
    measuring: Measuring,
    llm: Config,
    eval_config: EvalConfig,
    show: bool,
) -> OptimizeResult:
    """Resume the run ``--resume`` names: against the ceilings it started with, or this
    machine's, where they were re-measured higher since (``re_measured_higher``)."""
    assert targets.resume is not None
    run = _resumable(store, targets.resume, targets.backend, targets.workload)
    inputs = _inputs(llm, run.backend, eval_config, show, measuring)
    note = hardware_note(run, inputs.hardware)
    if note and show:
        err_console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    budget = run_budget(store, run, spending.budget_usd, fallback=llm)
    return execute_run(store, run, replace(inputs, budget=budget), resume=True)


def _start(
    store: Store,
    targets: Targets,
    search: SearchConfig,
    spending: Spending,
    measuring: Measuring,
    llm: Config,
    eval_config: EvalConfig,
    workspace: Path | None,
    show: bool,
) -> list[OptimizeResult]:
    """Start one run per problem, one after another, under one budget (with --suite,
    --budget-usd is the total)."""
    backend = targets.backend or "cpu"
    starts = _starting_points(targets, search, workspace, show)
    inputs = _inputs(llm, backend, eval_config, show, measuring)
    inputs = replace(inputs, budget=Budget(llm.budget.max_usd, llm.budget.max_tokens))
    results = []
    for problem, on, start in starts:
        sizes = {w: problem.workload(w).sizes for w in on.all}
        target = RunTarget(
            problem.name, on.primary, backend, inputs.hardware, problem.fingerprint, on, sizes
        )
        run = new_run(store, target, search, llm, start, spending.replay_from or ())
        results.append(execute_run(store, run, inputs, resume=False))
        if results[-1].stopped:  # the endpoint failed: the next problems would fail alike
            break
    return results


def _starting_points(
    targets: Targets, search: SearchConfig, workspace: Path | None, show: bool
) -> list[tuple[Problem, RunWorkloads, str | None]]:
    """Each problem to run, its workloads and the kernel it starts from (None: its baseline);
    a strategy that tunes (autotune) keeps only those whose starting kernel declares
    tunables."""
    names = suite_names() if targets.suite else list(targets.problems or [])
    backend, tuned = targets.backend or "cpu", list(targets.workload or ["cpu"])
    chosen = [views.problem_and_workload(n, tuned[0], workspace) for n in names]
    workloads = [choose_workloads(p, tuned, targets.held_out or ()) for p in chosen]
    starts = variants_cli.start_sources(chosen, targets.kernel, backend)
    plain = [p.name for p, s in zip(chosen, starts, strict=True) if targets.kernel and s is None]
    if plain and show:
        err_console.print(
            f"[yellow]note:[/yellow] no shipped {targets.kernel} kernel for {', '.join(plain)}: "
            "starting from the baseline",
            highlight=False,
        )
    keep = range(len(chosen))
    if strategy_for(search.strategy).needs_tunables:  # only what declares them (--suite: a note)
        keep, skipped = variants_cli.tunable_problems(chosen, starts, backend)
        if skipped and show:
            err_console.print(
                f"[yellow]note:[/yellow] {search.strategy} skips {', '.join(skipped)}: no "
                "tunables declared in the kernel it would start from",
                highlight=False,
            )
    return [(chosen[i], workloads[i], starts[i]) for i in keep]


def _export(
    results: Sequence[OptimizeResult], to: Path, workspace: Path | None, show: bool
) -> None:
    """Export each run's best kernel (one folder per problem inside ``to`` when several)."""
    for r in results:
        folder = to if len(results) == 1 else to / r.run.problem
        exported = export_cli.export_run(r.run.problem, r.run.id, folder, None, workspace)
        if show:
            export_cli.show(exported)


def _inputs(
    llm: Config, backend: str, eval_config: EvalConfig, show: bool, measuring: Measuring
) -> RunInputs:
    hardware = common.hardware_for(backend)
    return RunInputs(
        llm,
        hardware,
        eval_config,
        console if show else None,
        profiler=measuring.profiler,
        ray_address=measuring.ray_address,
    )


def _resumable(
    store: Store, ref: str, backend: str | None, workload: list[str] | None
) -> RunRecord:
    """The run to resume; a --backend or --workload that contradicts its record is refused
    (a resume takes them from the record)."""
    run = common.find_run(store, ref)
    if RunSpec.of(run).search is None:
        raise UserError(
            f"run {run.id} is a {run.strategy} session (recorded by `accelopt mcp`), not a "
            f"search: start one from its best kernel with `accelopt optimize {run.problem} "
            "--kernel FILE`"
        )
    tuned = " ".join(run_workloads(run).tuned)
    named = [workload_name(run_problem(store, run), w) for w in workload or ()]  # canonical
    for option, given, recorded in (
        ("--backend", backend, run.backend),
        ("--workload", " ".join(named) if named else None, tuned),
    ):
        if given is not None and given != recorded:
            raise UserError(
                f"run {run.id} is a {recorded} run: a resume takes {option} from its record "
                f"(omit {option}, or start a new run)"
            )
    return run


def _finish(
    store: Store, result: OptimizeResult, out: Path | None, show: bool
) -> tuple[RunSummary, RunCeiling]:
    """Write the best kernel, show the run's tables; its summary, with the usage of all its
    sessions (the store's), and the ceiling its tables are scored against."""
    target = (
        out
        or store.path.parent
        / "best"
        / f"{result.run.id}-{result.run.problem}{source_suffix(result.run.backend)}"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(result.best.kernel.source)
    found = generalization(store, result.run)
    summary = replace(
        run_summary(result),
        usage=store.usage_by_agent(result.run.id),
        best_kernel_path=str(target),
        generalization=found if found.workloads.several else None,
    )
    hardware = run_spec(result.run)
    ceiling = run_ceiling(_shown(result), run_problem(store, result.run), hardware)
    if show:
        table = result_table(
            summary, ceiling, hardware, headline_speedup(summary), headline_caption(summary)
        )
        console.print(table)
        if found.workloads.several:
            problem = run_problem(store, result.run)
            console.print(generalization_table(found, workload_peaks(found, problem, hardware)))
        tables = views.variant_tables(store, result.run)
        for tuned in tables:
            console.print(variants_cli.variant_table(asdict(tuned), result.run.created_at))
        if summary.usage:
            console.print(usage_table(summary.usage))
        console.print(f"best kernel written to {target}", highlight=False)
        if tunes(result.run):  # the last line: what the tuning confirmed
            found = variants_cli.verdict(
                tables, result.baseline.hash, result.best.hash, summary.speedup
            )
            console.print(found, highlight=False, markup=False)
    return summary, ceiling


def tunes(run: RunRecord) -> bool:
    """Whether the run's strategy is one that tunes (autotune): its tables end with the
    tuning's verdict."""
    strategy = STRATEGIES.get(run.strategy)
    return strategy is not None and strategy.needs_tunables


def run_spec(run: RunRecord) -> HardwareSpec | None:
    """The ceilings the run is scored against, as recorded (None where the record lacks them)."""
    spec = RunSpec.of(run).hardware_spec
    return spec if spec is not None and spec.key() == run.hardware else None


def _shown(result: OptimizeResult) -> list[Evaluation]:
    """The evaluations the run's table shows: its closing session's, else the search's."""
    if (h := result.headline) is not None:
        return [h.best, h.baseline]
    return [result.best.evaluation, result.baseline.evaluation]


def headline_speedup(summary: RunSummary) -> str:
    """The best kernel's speedup, with the interval of the session that measured it."""
    h = summary.headline
    shown = speedup_x(summary.speedup)
    if h is None or h.interval is None or summary.speedup is None or h.speedup is None:
        return shown
    return f"{shown} ± {h.interval:.1%}"


def headline_caption(summary: RunSummary) -> str:
    """Where the table's figures come from."""
    h = summary.headline
    if h is None:
        return (
            "speedup (higher is faster) from the search's own evaluations, not re-timed "
            "together: the run ended before its closing session"
        )
    where = "in one session" if not h.disturbed else "in one session (disturbed: slices' floors)"
    return (
        f"speedup (higher is faster), ms and % of peak: the starting and the best kernel "
        f"re-timed side by side {where} at the run's end, {h.rounds} rounds, "
        f"{h.measured_at}; the best reference timed again right after"
    )


def usage_table(usage: Mapping[str, Usage]) -> Table:
    table = Table(title="LLM usage", title_justify="left")
    for col in ("agent", "calls", "failed", "replayed", "tokens in", "tokens out", "$"):
        table.add_column(col, justify="left" if col == "agent" else "right")
    for agent, u in usage.items():
        unknown = f" (+{u.unknown_cost} unknown)" if u.unknown_cost else ""
        table.add_row(
            agent,
            str(u.calls),
            str(u.failed),
            str(u.replayed),
            str(u.tokens_in),
            str(u.tokens_out),
            usd_plain(u.cost_usd) + unknown,
        )
    return table
