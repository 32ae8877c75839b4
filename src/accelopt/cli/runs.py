"""``accelopt runs``: what the store holds about past runs."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from accelopt.cli.common import RunIdArgument, WorkspaceOption, find_run, open_store_readonly
from accelopt.cli.generalization import generalization_table, workload_peaks
from accelopt.cli.output import (
    JsonOption,
    console,
    err_console,
    shows_table,
    versus_reference,
    write_json,
)
from accelopt.cli.variants import variant_table
from accelopt.errors import UserError
from accelopt.formatting import milliseconds, percent, speedup_x, usd_plain
from accelopt.reports.costs import ResultCost
from accelopt.search.spec import RunSpec, run_problem
from accelopt.search.workloads import Generalization, generalization
from accelopt.store.errors import BadRowError
from accelopt.store.records import RunRecord
from accelopt.store.store import Store
from accelopt.views import run_row, run_show_json

app = typer.Typer(help="Past runs: list them, show one.", no_args_is_help=True)


@app.command("list")
def list_command(workspace: WorkspaceOption = None, json_path: JsonOption = None) -> None:
    """Every run in the workspace, newest first (a run whose rows are damaged is left out, with
    a warning that names the row)."""
    with open_store_readonly(workspace) as store:
        rows = [row for run in store.list_runs() if (row := _row_or_warn(store, run)) is not None]
    if shows_table(json_path):
        table = Table(title="runs", title_justify="left")
        for col in (
            "run",
            "problem",
            "workload",
            "strategy",
            "status",
            "created",
            "baseline ms",
            "best ms",
            "% of peak",
            "speedup",
            "vs best ref",
            "$",
        ):
            table.add_column(col)
        for r in rows:
            table.add_row(
                r["run"],
                r["problem"],
                _workloads_text(r),
                r["strategy"],
                r["status"],
                r["created_at"],
                milliseconds(r["baseline_latency_s"]),
                milliseconds(r["best_latency_s"]),
                percent(r["best_pct_of_peak"]),
                _speedup(r),
                versus_reference(
                    (r["best_reference"] or {}).get("kind"), r["speedup_over_reference"]
                ),
                usd_plain(r["cost_usd"]),
            )
        table.caption = SPEEDUP_NOTE
        table.caption_justify = "left"
        console.print(table)
    write_json(json_path, rows)


SPEEDUP_NOTE = (
    "speedup (higher is faster): with ±, the starting and the best kernel re-timed side by side "
    "at the run's end (its interval); without, from the search's own evaluations (a run that "
    "ended before its closing session)"
)


def _speedup(row: dict[str, Any]) -> str:
    interval = row.get("speedup_interval")
    shown = speedup_x(row["speedup"])
    return f"{shown} ± {interval:.1%}" if interval is not None and row["speedup"] else shown


def _row_or_warn(store: Store, run: RunRecord) -> dict[str, Any] | None:
    """The run's row of ``runs list``; None, with a warning, when one of its rows is damaged."""
    try:
        return run_row(store, run)
    except BadRowError as exc:
        err_console.print(
            f"warning: run {run.id} is left out: {exc}",
            style="yellow",
            highlight=False,
            markup=False,
        )
        return None


def _workloads_text(row: dict[str, Any]) -> str:
    held = f" (held out: {', '.join(row['held_out'])})" if row["held_out"] else ""
    return "+".join(row["workloads"]) + held


@app.command("show")
def show_command(
    run_id: RunIdArgument,
    workspace: WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """One run: parameters, the best kernel per iteration, and the lineage of the best kernel."""
    with open_store_readonly(workspace) as store:
        run = find_run(store, run_id)
        payload = run_show_json(store, run)
        found = generalization(store, run)
        peaks = _peaks(store, run, found) if found.workloads.several else {}
    if shows_table(json_path):
        _print_show(payload)
        if found.workloads.several:
            console.print(generalization_table(found, peaks))
    write_json(json_path, payload)


def _peaks(store: Store, run: RunRecord, found: Generalization) -> dict[str, float]:
    """Each workload's roofline time at the run's recorded ceilings ({} where the problem or
    the ceilings are not known here: the table then shows the search's own figures)."""
    spec = RunSpec.of(run).hardware_spec
    try:
        problem = run_problem(store, run)
    except (UserError, LookupError):
        return {}
    return workload_peaks(found, problem, spec if spec and spec.key() == run.hardware else None)


def _print_show(p: dict[str, Any]) -> None:
    console.print(
        f"[bold]run {p['run']}[/bold]: {p['problem']} / {p['workload']} on {p['hardware']}, "
        f"{p['strategy']}, {p['status']}",
        highlight=False,
    )
    for label, key in (("parameters", "search"), ("models", "models")):
        if p["config"].get(key) is not None:  # an agent session (accelopt mcp) has neither
            console.print(f"{label}: {p['config'][key]}", highlight=False, markup=False)
    table = Table(title="best per iteration", title_justify="left")
    for col in (
        "iteration",
        "best ms",
        "% of peak",
        "beam",
        "evaluated",
        "failed",
        "$",
        "calls without a result",
    ):
        table.add_column(col, justify="right")
    for i in p["iterations"]:
        failed = sum(i["failed_by_status"].values())
        wasted = ", ".join(f"{what} {n}" for what, n in i.get("wasted", {}).items()) or "—"
        table.add_row(
            str(i["iteration"]),
            milliseconds(i["best_latency_s"]),
            percent(i["best_pct_of_peak"]),
            str(len(i["beam"])),
            str(i["evaluated"]),
            str(failed),
            usd_plain(i["spent_usd"]),
            wasted,
        )
    console.print(table)
    table = Table(title="lineage of the best kernel", title_justify="left")
    for col in ("iteration", "kernel", "origin", "plan", "ms", "speedup"):
        table.add_column(col)
    for s in p["lineage"]:
        speed = s["speedup_over_parent"]
        table.add_row(
            str(s["iteration"]),
            s["hash"],
            s["origin"],
            Text(s["plan"] or "—"),  # LLM text
            milliseconds(s["latency_s"]),
            speedup_x(speed),
        )
    console.print(table)
    for tuned in p.get("variants", []):
        console.print(variant_table(tuned, p.get("created_at", "")))
    if "cost" in p:
        console.print(f"cost: {ResultCost(**p['cost']).text}", highlight=False)
    cut = p.get("cut_off", {})
    if cut.get("calls"):
        console.print(
            f"{cut['calls']} paid calls were cut off by a kill before they were recorded: "
            f"counted as spent, at most ${cut['usd']:.4f}",
            highlight=False,
        )
