"""``accelopt runs``: what the store holds about past runs."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.table import Table

from accelopt.cli.optimize import WorkspaceOption, open_store
from accelopt.cli.output import (
    JsonOption,
    console,
    fmt_ms,
    fmt_pct,
    generalization_table,
    shows_table,
    write_json,
)
from accelopt.errors import UserError
from accelopt.profiling.evaluation import Evaluation
from accelopt.reports.run_report import lineage
from accelopt.search.workloads import generalization, run_workloads
from accelopt.store.records import RunRecord
from accelopt.store.store import Store

app = typer.Typer(help="Past runs: list them, show one.", no_args_is_help=True)


def _latency(evaluations: dict[str, Evaluation], kernel_hash: str) -> float | None:
    e = evaluations.get(kernel_hash)
    return e.latency_s if e is not None and e.passed else None


def run_row(store: Store, run: RunRecord) -> dict[str, Any]:
    evaluations = store.run_evaluations(run.id)
    base, top = _latency(evaluations, run.baseline_hash), _latency(evaluations, run.best_hash)
    best_eval = evaluations.get(run.best_hash)
    usage = store.usage(run.id)
    return {
        "run": run.id,
        "problem": run.problem,
        "workload": run.workload,
        "workloads": list(run_workloads(run).tuned),
        "held_out": list(run_workloads(run).held_out),
        "strategy": run.strategy,
        "status": run.status,
        "created_at": run.created_at,
        "baseline_latency_s": base,
        "best_latency_s": top,
        "best_pct_of_peak": best_eval.pct_of_peak if best_eval else None,
        "speedup": base / top if base and top else None,
        "cost_usd": sum(u["cost_usd"] or 0 for u in usage.values()),
    }


@app.command("list")
def list_command(workspace: WorkspaceOption = None, json_path: JsonOption = None) -> None:
    """Every run in the workspace, newest first."""
    with open_store(workspace) as store:
        rows = [run_row(store, run) for run in store.list_runs()]
    if shows_table(json_path):
        table = Table(title="runs", title_justify="left")
        for col in ("run", "problem", "workload", "strategy", "status", "created",
                    "baseline ms", "best ms", "% of peak", "speedup", "$"):  # fmt: skip
            table.add_column(col)
        for r in rows:
            table.add_row(
                r["run"], r["problem"], _workloads_text(r), r["strategy"], r["status"],
                r["created_at"], fmt_ms(r["baseline_latency_s"]), fmt_ms(r["best_latency_s"]),
                fmt_pct(r["best_pct_of_peak"]),
                f"{r['speedup']:.2f}x" if r["speedup"] else "—", f"{r['cost_usd']:.4f}",
            )  # fmt: skip
        console.print(table)
    write_json(json_path, rows)


def _workloads_text(row: dict[str, Any]) -> str:
    held = f" (held out: {', '.join(row['held_out'])})" if row["held_out"] else ""
    return "+".join(row["workloads"]) + held


@app.command("show")
def show_command(
    run_id: Annotated[str, typer.Argument(help="run id (or a unique prefix)")],
    workspace: WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """One run: parameters, the best kernel per iteration, and the lineage of the best kernel."""
    with open_store(workspace) as store:
        run = store.get_run(run_id)
        if run is None:
            raise UserError(f"no run {run_id!r} in {store.path}: see `accelopt runs list`")
        payload = run_show_json(store, run)
        found = generalization(store, run)
    if shows_table(json_path):
        _print_show(payload)
        if found.workloads.several:
            console.print(generalization_table(found))
    write_json(json_path, payload)


def run_show_json(store: Store, run: RunRecord) -> dict[str, Any]:
    """What `runs show --json` prints (and the HTTP API's /v1/runs/ID gives)."""
    kernels = {k.hash: k for k in store.kernels(run.id)}
    evaluations = store.run_evaluations(run.id)
    base = _latency(evaluations, run.baseline_hash)
    payload = {
        **run_row(store, run),
        "backend": run.backend,
        "hardware": run.hardware,
        "config": run.config,
        "iterations": [vars(i) | {"beam": list(i.beam)} for i in store.iterations(run.id)],
        "lineage": [asdict(s) for s in lineage(kernels, evaluations, run.best_hash, base)],
        "usage": store.usage(run.id),
    }
    found = generalization(store, run)
    if found.workloads.several:
        payload["generalization"] = found.as_json()
    return payload


def _print_show(p: dict[str, Any]) -> None:
    console.print(
        f"[bold]run {p['run']}[/bold]: {p['problem']} / {p['workload']} on {p['hardware']}, "
        f"{p['strategy']}, {p['status']}", highlight=False,
    )  # fmt: skip
    for label, key in (("parameters", "search"), ("models", "models")):
        if p["config"].get(key) is not None:  # an agent session (accelopt mcp) has neither
            console.print(f"{label}: {p['config'][key]}", highlight=False)
    table = Table(title="best per iteration", title_justify="left")
    for col in ("iteration", "best ms", "% of peak", "beam", "evaluated", "failed", "$",
                "calls without a result"):  # fmt: skip
        table.add_column(col, justify="right")
    for i in p["iterations"]:
        failed = sum(i["failed_by_status"].values())
        wasted = ", ".join(f"{what} {n}" for what, n in i.get("wasted", {}).items()) or "—"
        table.add_row(
            str(i["iteration"]), fmt_ms(i["best_latency_s"]), fmt_pct(i["best_pct_of_peak"]),
            str(len(i["beam"])), str(i["evaluated"]), str(failed), f"{i['spent_usd']:.4f}",
            wasted,
        )  # fmt: skip
    console.print(table)
    table = Table(title="lineage of the best kernel", title_justify="left")
    for col in ("iteration", "kernel", "origin", "plan", "ms", "speedup"):
        table.add_column(col)
    for s in p["lineage"]:
        speed = s["speedup_over_parent"]
        table.add_row(
            str(s["iteration"]), s["hash"], s["origin"], s["plan"] or "—", fmt_ms(s["latency_s"]),
            f"{speed:.2f}x" if speed else "—",
        )  # fmt: skip
    console.print(table)
