"""``accelopt store``: the workspace's run store itself (``store check``: is every row readable)."""

from __future__ import annotations

import typer
from rich.table import Table

from accelopt.cli.common import WorkspaceOption, open_store_readonly
from accelopt.cli.output import JsonOption, console, err_console, shows_table, write_json
from accelopt.store.errors import SALVAGE

app = typer.Typer(
    help="The workspace's run store: check that every row can be read.", no_args_is_help=True
)


@app.command("check")
def check_command(workspace: WorkspaceOption = None, json_path: JsonOption = None) -> None:
    """Read every row of every table and name each damaged one (text that is not UTF-8, JSON
    that does not parse, a value its record cannot take). Exit status 1 when any is found; the
    store is only read."""
    with open_store_readonly(workspace) as store:
        pages, tables, bad = store.check()
        path = store.path
    if shows_table(json_path):
        for problem in pages:
            console.print(f"damaged page: {problem}", highlight=False, markup=False)
        if bad:
            table = Table(title=f"damaged rows in {path}", title_justify="left")
            for col in ("table", "key", "why"):
                table.add_column(col)
            for row in bad:
                table.add_row(row.table, row.key, row.why)
            console.print(table)
        if not bad and not pages:
            console.print(f"{path}: every row of its {len(tables)} tables reads", highlight=False)
    write_json(json_path, {"path": str(path), "pages": pages, "rows": [r.as_json() for r in bad]})
    if pages:
        err_console.print(f"{path} has damaged pages: {SALVAGE}", highlight=False, markup=False)
    if bad:
        err_console.print(
            f"{len(bad)} damaged rows in {path}: every other row reads as it is, and a damaged "
            "kernel source is replaced when a run writes that kernel again",
            highlight=False,
            markup=False,
        )
    if bad or pages:
        raise typer.Exit(1)
