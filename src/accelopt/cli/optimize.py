"""``accelopt optimize``: run the search on one problem, several, or the whole suite."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from accelopt import views
from accelopt.backends.kernel import source_suffix
from accelopt.cli import common
from accelopt.cli import export as export_cli
from accelopt.cli import variants as variants_cli
from accelopt.cli.output import (
    JsonOption,
    console,
    err_console,
    generalization_table,
    shows_table,
    writable_option,
    write_json,
)
from accelopt.errors import UserError
from accelopt.formatting import milliseconds, percent, speedup_x, usd_plain
from accelopt.llm.budget import Budget
from accelopt.llm.client import Usage
from accelopt.llm.config import Config, load_config
from accelopt.problems.loader import suite_names
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.scoring import geometric_mean_pct
from accelopt.search.config import SearchConfig
from accelopt.search.run import (
    OptimizeResult,
    RunInputs,
    RunSummary,
    execute_run,
    hardware_note,
    new_run,
    run_budget,
    run_summary,
)
from accelopt.search.spec import RunSpec
from accelopt.search.workloads import choose_workloads, generalization, run_workloads
from accelopt.store.errors import StoreError
from accelopt.store.records import RunRecord
from accelopt.store.store import Store

WorkspaceOption = common.WorkspaceOption


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


def _search_config(**fields: Any) -> SearchConfig:
    try:
        return SearchConfig(**fields)
    except ValueError as exc:
        raise UserError(f"invalid search option: {common.one_line(exc)}") from None


def _eval_config(workers: int) -> EvalConfig:
    try:
        return EvalConfig(workers=workers)
    except ValueError as exc:
        raise UserError(f"invalid evaluation option: {common.one_line(exc)}") from None


def _llm_config(config: Path | None, budget_usd: float | None) -> Config:
    cfg = load_config(config)
    if budget_usd is not None:
        budget = cfg.budget.model_copy(update={"max_usd": budget_usd})
        cfg = cfg.model_copy(update={"budget": budget})
    return cfg


def optimize_command(
    problems: Annotated[list[str] | None, typer.Argument(help="problem names")] = None,
    suite: Annotated[bool, typer.Option("--suite", help="every problem of the suite")] = False,
    backend: Annotated[
        str | None, typer.Option(help="kernel language/device (default cpu)")
    ] = None,
    workload: Annotated[
        list[str] | None,
        typer.Option(
            help="sizes to tune on: cpu (default), paper, small, tiny, or a problem's own "
            "(repeatable: the score is the geometric mean of % of peak over them)"
        ),
    ] = None,
    held_out: Annotated[
        list[str] | None,
        typer.Option(
            "--held-out",
            help="a workload the agents never see, on which the baseline and the best kernel "
            "are measured at the end (repeatable)",
        ),
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="LLM config (default ./accelopt.yaml)")
    ] = None,
    beam: Annotated[int, typer.Option(help="B: kernels kept per iteration")] = 4,
    plans: Annotated[int, typer.Option(help="N: plans per kernel")] = 4,
    samples: Annotated[int, typer.Option(help="K: kernels per plan")] = 2,
    iterations: Annotated[int, typer.Option(help="T: iterations")] = 8,
    fixer: Annotated[int, typer.Option(help="F: repair rounds per failed kernel")] = 1,
    per_plan: Annotated[
        int, typer.Option(help="children of one (parent, plan) the beam may keep")
    ] = 1,
    strategy: Annotated[
        str,
        typer.Option(
            help="beam, sampling, or autotune: no LLM (and no config), the starting kernel's "
            "declared tunables measured and the fastest kept"
        ),
    ] = "beam",
    variants: Annotated[
        int,
        typer.Option(
            help="variants tried per kernel that declares tunables (autotune: per iteration; "
            "0: no tuning)"
        ),
    ] = 8,
    memory: Annotated[str, typer.Option(help="lessons from: off, run or workspace")] = "workspace",
    budget_usd: Annotated[
        float | None,
        typer.Option(
            help="stop spending at this many $ (with --suite: in total; on --resume: "
            "replaces the run's own)"
        ),
    ] = None,
    resume: Annotated[str | None, typer.Option(help="continue this run")] = None,
    replay_from: Annotated[
        list[str] | None,
        typer.Option(help="reuse this earlier run's answers to identical prompts (repeatable)"),
    ] = None,
    kernel: Annotated[
        Path | None,
        typer.Option(
            help="start from this kernel file, or the problem's shipped baseline or expert, "
            "instead of its baseline (a problem without one starts from a kernel the executor "
            "writes from its reference)"
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="write the best kernel here", callback=writable_option("--out")),
    ] = None,
    export: Annotated[
        Path | None,
        typer.Option(
            help="export the best kernel as a library into this folder at the end (one folder "
            "per problem inside it when there are several): see `accelopt export`"
        ),
    ] = None,
    workers: Annotated[int, typer.Option(help="evaluation worker processes")] = 2,
    profiler: common.ProfilerOption = "local",
    ray_address: common.RayAddressOption = None,
    workspace: WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """Make a kernel faster: beam search with LLM agents, measured against the roofline."""
    names = suite_names() if suite else list(problems or [])
    if not names and not resume:
        raise UserError("name a problem (see `accelopt bench list`), use --suite, or --resume RUN")
    if resume and (names or kernel or replay_from or held_out):
        raise UserError(
            "--resume continues a run as it was recorded: give no problem, --kernel, "
            "--replay-from or --held-out with it"
        )
    common.workspace_dir(workspace)  # a bad workspace is told before any work
    llm = _llm_config(config, budget_usd)
    eval_config = _eval_config(workers)
    show = shows_table(json_path)
    with open_store(workspace) as store:
        if resume:
            run = _resumable(store, resume, backend, workload)
            inputs = _inputs(llm, run.backend, eval_config, show, profiler, ray_address)
            note = hardware_note(run, inputs.hardware)
            if note and show:
                err_console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
            budget = run_budget(store, run, budget_usd, fallback=llm)
            results = [execute_run(store, run, replace(inputs, budget=budget), resume=True)]
        else:
            search = _search_config(
                strategy=strategy, beam=beam, plans=plans, samples=samples,
                iterations=iterations, fixer=fixer, memory=memory, per_plan=per_plan,
                variants=variants,
            )  # fmt: skip
            tuned = list(workload or ["cpu"])
            chosen = [views.problem_and_workload(n, tuned[0], workspace) for n in names]
            workloads = [choose_workloads(p, tuned, held_out or ()) for p in chosen]
            starts = variants_cli.start_sources(chosen, kernel, backend or "cpu")
            plain = [p.name for p, s in zip(chosen, starts, strict=True) if kernel and s is None]
            if plain and show:
                err_console.print(
                    f"[yellow]note:[/yellow] no shipped {kernel} kernel for {', '.join(plain)}: "
                    "starting from the baseline", highlight=False,
                )  # fmt: skip
            if search.strategy == "autotune":  # only what declares tunables (--suite: a note)
                keep, skipped = variants_cli.tunable_problems(chosen, starts, backend or "cpu")
                chosen, workloads = [chosen[i] for i in keep], [workloads[i] for i in keep]
                starts = [starts[i] for i in keep]
                if skipped and show:
                    err_console.print(
                        f"[yellow]note:[/yellow] autotune skips {', '.join(skipped)}: no "
                        "tunables declared in the kernel it would start from", highlight=False,
                    )  # fmt: skip
            inputs = _inputs(llm, backend or "cpu", eval_config, show, profiler, ray_address)
            # one budget for the whole invocation: with --suite, --budget-usd is the total
            shared = Budget(llm.budget.max_usd, llm.budget.max_tokens)
            inputs = replace(inputs, budget=shared)
            results = []
            for problem, on, start in zip(chosen, workloads, starts, strict=True):
                sizes = {w: problem.workload(w).sizes for w in on.all}
                run = new_run(store, problem.name, on.primary, backend or "cpu", inputs.hardware,
                              search, llm, start, replay_from or (),
                              problem_version=problem.fingerprint, workloads=on,
                              sizes=sizes)  # fmt: skip
                results.append(execute_run(store, run, inputs, resume=False))
        summaries = [_finish(store, r, out if len(names) <= 1 else None, show) for r in results]
        if show and len(results) > 1:
            console.print(suite_results_table(summaries))
    if export is not None:
        for r in results:
            folder = export if len(results) == 1 else export / r.run.problem
            exported = export_cli.export_run(r.run.problem, r.run.id, folder, None, workspace)
            if show:
                export_cli.show(exported)
    payload = [s.as_json() for s in summaries]
    write_json(json_path, payload if len(payload) > 1 else payload[0])


def _inputs(
    llm: Config, backend: str, eval_config: EvalConfig, show: bool, profiler: str,
    ray_address: str | None,
) -> RunInputs:  # fmt: skip
    hardware = common.hardware_for(backend)
    return RunInputs(
        llm, hardware, eval_config, console if show else None,
        profiler=profiler, ray_address=ray_address,
    )  # fmt: skip


def _resumable(
    store: Store, ref: str, backend: str | None, workload: list[str] | None
) -> RunRecord:
    """The run to resume; a --backend or --workload that contradicts its record is refused
    (a resume takes them from the record)."""
    run = store.get_run(ref)
    if run is None:
        raise UserError(f"no run {ref!r} in {store.path}: see `accelopt runs list`")
    if RunSpec.of(run).search is None:
        raise UserError(
            f"run {run.id} is a {run.strategy} session (recorded by `accelopt mcp`), not a "
            f"search: start one from its best kernel with `accelopt optimize {run.problem} "
            "--kernel FILE`"
        )
    tuned = " ".join(run_workloads(run).tuned)
    for option, given, recorded in (
        ("--backend", backend, run.backend),
        ("--workload", " ".join(workload) if workload else None, tuned),
    ):
        if given is not None and given != recorded:
            raise UserError(
                f"run {run.id} is a {recorded} run: a resume takes {option} from its record "
                f"(omit {option}, or start a new run)"
            )
    return run


def _finish(store: Store, result: OptimizeResult, out: Path | None, show: bool) -> RunSummary:
    """Write the best kernel, show the run's tables; its summary, with the usage of all its
    sessions (the store's)."""
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
    if show:
        console.print(result_table(summary))
        if found.workloads.several:
            console.print(generalization_table(found))
        tables = views.variant_tables(store, result.run)
        for tuned in tables:
            console.print(variants_cli.variant_table(asdict(tuned)))
        if result.run.strategy == "autotune":
            found = variants_cli.verdict(tables, result.baseline.hash, result.best.hash,
                                         summary.speedup)  # fmt: skip
            console.print(found, highlight=False)
        if summary.usage:
            console.print(usage_table(summary.usage))
        console.print(f"best kernel written to {target}", highlight=False)
    return summary


def result_table(summary: RunSummary) -> Table:
    tuned = summary.workloads or (summary.workload,)
    shown = summary.workload if len(tuned) == 1 else f"geomean of {len(tuned)} workloads"
    title = f"run {summary.run}: {summary.problem} / {shown} ({summary.status})"
    table = Table(title=title, title_justify="left")
    for col in ("kernel", "ms", "% of peak", "speedup"):
        table.add_column(col, justify="left" if col == "kernel" else "right")
    b, t = summary.baseline, summary.best
    table.add_row("baseline", milliseconds(b.latency_s), percent(b.pct_of_peak), "1.00x")
    table.add_row(
        "best", milliseconds(t.latency_s), percent(t.pct_of_peak), speedup_x(summary.speedup)
    )
    return table


def usage_table(usage: Mapping[str, Usage]) -> Table:
    table = Table(title="LLM usage", title_justify="left")
    for col in ("agent", "calls", "failed", "replayed", "tokens in", "tokens out", "$"):
        table.add_column(col, justify="left" if col == "agent" else "right")
    for agent, u in usage.items():
        unknown = f" (+{u.unknown_cost} unknown)" if u.unknown_cost else ""
        table.add_row(
            agent, str(u.calls), str(u.failed), str(u.replayed), str(u.tokens_in),
            str(u.tokens_out), usd_plain(u.cost_usd) + unknown,
        )  # fmt: skip
    return table


def suite_results_table(summaries: Sequence[RunSummary]) -> Table:
    table = Table(title="suite results", title_justify="left")
    for col in ("problem", "status", "baseline %", "best %", "speedup", "$", "tokens"):
        table.add_column(col, justify="left" if col in {"problem", "status"} else "right")
    total_usd, total_tokens = 0.0, 0
    for s in summaries:
        usd = sum(u.cost_usd for u in s.usage.values())
        tokens = sum(u.tokens_in + u.tokens_out for u in s.usage.values())
        total_usd, total_tokens = total_usd + usd, total_tokens + tokens
        table.add_row(
            s.problem, s.status, percent(s.baseline.pct_of_peak), percent(s.best.pct_of_peak),
            speedup_x(s.speedup), usd_plain(usd), str(tokens),
        )  # fmt: skip
    table.add_section()
    base = geometric_mean_pct([s.baseline.pct_of_peak for s in summaries])
    top = geometric_mean_pct([s.best.pct_of_peak for s in summaries])
    speed = geometric_mean_pct([s.speedup for s in summaries if s.speedup])
    table.add_row(
        "geomean / total", "", percent(base), percent(top), speedup_x(speed),
        usd_plain(total_usd), str(total_tokens), style="bold",
    )  # fmt: skip
    return table
