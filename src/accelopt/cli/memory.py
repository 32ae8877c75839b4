"""``accelopt memory``: the lessons the workspace has learned, with their provenance."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from accelopt.cli.common import WorkspaceOption, open_store_readonly
from accelopt.cli.optimize import open_store
from accelopt.cli.output import JsonOption, check_writable, console, shows_table, write_json
from accelopt.errors import UserError, check_user_file
from accelopt.formatting import speedup_x
from accelopt.memory.transfer import ImportReport, LineNote, export_jsonl, import_jsonl

app = typer.Typer(help="The optimization memory: list, show, export, import.", no_args_is_help=True)


@app.command("list")
def list_command(
    problem: Annotated[str | None, typer.Option(help="only lessons from this problem")] = None,
    run: Annotated[str | None, typer.Option(help="only lessons from this run")] = None,
    workspace: WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """The lessons, newest first."""
    with open_store_readonly(workspace) as store:
        items = store.experiences(run_id=run, problem=problem)
    items = sorted(items, key=lambda e: (e.created_at, e.id or 0), reverse=True)
    if shows_table(json_path):
        table = Table(title=f"optimization memory ({len(items)} lessons)", title_justify="left")
        for col in ("id", "kind", "speedup", "problem", "run", "title"):
            table.add_column(col)
        for e in items:
            table.add_row(
                str(e.id), e.kind, speedup_x(e.speedup), e.problem, e.run_id, e.lesson.title
            )
        console.print(table)
    write_json(json_path, [asdict(e) for e in items])


@app.command("show")
def show_command(
    experience_id: Annotated[int, typer.Argument(help="lesson id (see `memory list`)")],
    workspace: WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """One lesson with its before/after snippet and where it came from."""
    with open_store_readonly(workspace) as store:
        e = store.get_experience(experience_id)
    if e is None:
        raise UserError(f"no lesson {experience_id} in this workspace: see `accelopt memory list`")
    if shows_table(json_path):
        console.print(f"[bold]{e.lesson.title}[/bold] ({e.kind}, {speedup_x(e.speedup)})")
        console.print(e.lesson.description, highlight=False)
        if e.lesson.before:
            console.print("[bold]before[/bold]\n" + e.lesson.before, highlight=False)
        if e.lesson.after:
            console.print("[bold]after[/bold]\n" + e.lesson.after, highlight=False)
        console.print(
            f"from run {e.run_id}, problem {e.problem}, backend {e.backend}, hardware "
            f"{e.hardware}, model {e.model}, {e.created_at}",
            highlight=False,
        )
    write_json(json_path, asdict(e))


@app.command("export")
def export_command(
    path: Annotated[Path, typer.Argument(help="JSONL file to write")],
    problem: Annotated[str | None, typer.Option(help="only lessons from this problem")] = None,
    workspace: WorkspaceOption = None,
) -> None:
    """Write the lessons as JSONL, one per line, to share or back up."""
    check_writable(path, "the export file")
    with open_store_readonly(workspace) as store:
        count = export_jsonl(store, path, problem=problem)
    console.print(f"exported {count} lessons to {path}", highlight=False)


@app.command("import")
def import_command(
    path: Annotated[Path, typer.Argument(help="JSONL file from `memory export`")],
    workspace: WorkspaceOption = None,
) -> None:
    """Add the lessons of a JSONL file: their text bounded, their speedups marked as claims;
    exact duplicates are skipped, malformed lines refused and named."""
    check_user_file(path, "file", "give the JSONL file `accelopt memory export` wrote")
    with open_store(workspace) as store:
        report = import_jsonl(store, path)
    for line in import_lines(report, str(path)):
        console.print(line, markup=False, highlight=False)


MAX_NOTES_SHOWN = 20  # per kind (bounded, refused): a garbage file must not flood the terminal


def import_lines(report: ImportReport, path: str) -> list[str]:
    """What ``memory import`` prints: the counts, then each bounded and each refused line."""
    skipped = f", {report.duplicates} already there" if report.duplicates else ""
    lines = [
        f"imported {report.added} lessons from {path}{skipped}; their speedups are claims,"
        " not measured here, and never rank them"
    ]
    lines += _notes("line {}: imported, {}", report.bounded)
    lines += _notes("refused line {}: {}", report.refused)
    return lines


def _notes(form: str, notes: Sequence[LineNote]) -> list[str]:
    shown = [form.format(n.line, n.text) for n in notes[:MAX_NOTES_SHOWN]]
    more = len(notes) - MAX_NOTES_SHOWN
    return shown + ([f"... and {more} more such lines"] if more > 0 else [])
