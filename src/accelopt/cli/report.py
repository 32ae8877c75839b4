"""``accelopt report RUN`` and ``accelopt runs compare RUN RUN...``: HTML pages about runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from accelopt.cli import common
from accelopt.cli.common import RunIdArgument, WorkspaceOption, find_run, open_store_readonly
from accelopt.cli.output import (
    JsonOption,
    console,
    err_console,
    shows_table,
    versus_reference,
    writable_option,
    write_json,
)
from accelopt.errors import UserError
from accelopt.formatting import percent, speedup_x, usd_plain
from accelopt.hardware.cache import load_cpu_spec
from accelopt.hardware.spec import HardwareSpec
from accelopt.reports import html
from accelopt.reports.compare import (
    RunComparison,
    comparison_json,
    load_comparison,
    models_text,
    write_compare_report,
)
from accelopt.reports.run_report import write_run_report
from accelopt.search.one_ceiling import rescore_stored_run
from accelopt.store.errors import StoreReadOnly
from accelopt.store.records import RunRecord
from accelopt.store.store import Store

OutOption = Annotated[
    Path | None,
    typer.Option("--out", help="write the HTML page here", callback=writable_option("--out")),
]


def _write(path: Path, write: Callable[[Path], Path]) -> Path:
    try:
        return write(path)
    except OSError as exc:
        raise UserError(
            f"cannot write the report to {str(path)!r} ({exc.strerror}): give --out a file in a "
            "folder you can write"
        ) from None


def report_command(
    run_id: RunIdArgument,
    out: OutOption = None,
    workspace: WorkspaceOption = None,
) -> None:
    """One run as a self-contained HTML page: summary, baseline vs best, progress plot, lineage,
    the best kernel and its diff, lessons, failures, tokens and $ (default: WORKSPACE/reports/)."""
    with open_store_readonly(workspace) as store:
        run = find_run(store, run_id)
        target = out or store.path.parent / "reports" / f"{run.id}-{run.problem}.html"
        spec = load_cpu_spec(measure_if_missing=False)
        try:
            run = _rescored(store, run, spec)  # one run, one ceiling
            _write(target, lambda path: write_run_report(path, store, run, spec))
        except StoreReadOnly:  # a re-score is due: it is kept in the store, where writable
            writable = _writable_store(workspace)
            if writable is None:
                err_console.print(
                    f"run {run.id} is shown as stored, against several ceilings of its device: "
                    "its workspace is read-only",
                    highlight=False,
                    markup=False,
                )
                _write(target, lambda path: write_run_report(path, store, run, spec))
            else:
                with writable:
                    run = _rescored(writable, run, spec)
                    _write(target, lambda path: write_run_report(path, writable, run, spec))
    console.print(
        f"report written to {target} ({target.stat().st_size // 1024} KiB)", highlight=False
    )


def _rescored(store: Store, run: RunRecord, spec: HardwareSpec | None) -> RunRecord:
    """``rescore_stored_run``, saying so when it re-scored the run; a ``StoreReadOnly`` when the
    re-score is due and ``store`` is read-only."""
    before = run.hardware
    run = rescore_stored_run(store, run, spec)
    if run.hardware != before:
        err_console.print(
            f"run {run.id} was scored against several ceilings of its device (one raised "
            f"during it): re-scored against {run.hardware}",
            highlight=False,
            markup=False,
        )
    return run


def _writable_store(workspace: Path | None) -> Store | None:
    """The store opened for writing, for a run that must be re-scored first; None where the
    workspace cannot be written."""
    try:
        return Store.open(common.workspace_dir(workspace))
    except UserError:
        return None


def compare_command(
    run_ids: Annotated[list[str], typer.Argument(help="run ids (or unique prefixes)")],
    out: OutOption = None,
    json_path: JsonOption = None,
    workspace: WorkspaceOption = None,
) -> None:
    """Runs side by side: best % of peak, $ and tokens; with --out, plots of best % of peak
    against $ spent and against iterations, one line per run."""
    with open_store_readonly(workspace) as store:
        comparisons = [load_comparison(store, find_run(store, r)) for r in run_ids]
    show = shows_table(json_path)
    if show:
        console.print(compare_table(comparisons))
    if out is not None:
        _write(out, lambda path: write_compare_report(path, comparisons))
        (console if show else err_console).print(f"comparison written to {out}", highlight=False)
    write_json(json_path, [comparison_json(c) for c in comparisons])


def compare_table(comparisons: list[RunComparison]) -> Table:
    table = Table(title="runs compared", title_justify="left")
    for col in _COLUMNS:
        table.add_column(col, justify="right" if col in _NUMERIC else "left", no_wrap=col == "run")
    for c in comparisons:
        unknown = f" (+{c.unknown_cost_calls} unpriced)" if c.unknown_cost_calls else ""
        table.add_row(
            c.run,
            c.problem,
            c.strategy,
            c.search_size,
            models_text(c.models),
            str(c.iterations),
            html.duration(c.wall_s) if c.wall_s is not None else "—",
            _or_dash(c.per_minute, "{:.1f}"),
            percent(c.baseline_pct),
            percent(c.best_pct),
            speedup_x(c.speedup) + _within(c.speedup_interval),
            versus_reference(c.reference and c.reference.kind, c.speedup_over_reference),
            usd_plain(c.cost_usd) + unknown,
            f"{c.tokens:,}",
            _or_dash(c.cost.usd_per_point, "{:.4f}"),
            _or_dash(c.cost.calls_per_improvement, "{:.1f}"),
            str(c.cost.variants),
        )
    return table


def _within(interval: float | None) -> str:
    return f" ± {interval:.1%}" if interval is not None else ""


_COLUMNS = (
    *("run", "problem", "strategy", "search", "models"),
    *("iterations", "wall", "per min", "baseline %", "best %", "speedup", "vs best ref"),
    *("$", "tokens", "$ / point", "calls / kept", "free variants"),
)
_NUMERIC = frozenset(_COLUMNS[5:])  # from "iterations" on


def _or_dash(value: float | None, form: str) -> str:
    return "—" if value is None else form.format(value)
