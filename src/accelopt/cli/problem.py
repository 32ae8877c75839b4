"""``accelopt problem``: your own operators — add, list, remove, import from KernelBench."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from accelopt import views
from accelopt.backends.registry import shipped_kernel
from accelopt.cli import common
from accelopt.cli.output import JsonOption, console, err_console, shows_table, write_json
from accelopt.errors import UserError
from accelopt.problems.loader import (
    load_problem,
    problems_dir,
    suite_names,
    workspace_names,
)
from accelopt.problems.records import Problem
from accelopt.problems.workspace import add_problem, remove_problem

app = typer.Typer(
    help="Your own problems, kept in the workspace: add, list, remove, import.",
    no_args_is_help=True,
)
import_app = typer.Typer(help="Turn problems of another format into workspace problems.")
app.add_typer(import_app, name="import")


def signature(problem: Problem) -> str:
    ins = ", ".join(f"{t.name}[{','.join(t.shape)}]" for t in problem.inputs)
    outs = ", ".join(f"{t.name}[{','.join(t.shape)}]" for t in problem.outputs)
    return f"{ins} → {outs}"


@app.command("add")
def add_command(
    source: Annotated[
        Path, typer.Argument(help="a problem file defining PROBLEM, or a folder holding problem.py")
    ],
    baseline: Annotated[
        Path | None, typer.Option(help="its starting kernel (.c for cpu, .py for triton)")
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="replace a workspace problem of the same name")
    ] = False,
    workspace: common.WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """Check a problem (names, sizes, cost model, one run of its reference) and add it."""
    folder = common.workspace_dir(workspace)
    problem = add_problem(source, folder, baseline=baseline, replace=replace)
    if shows_table(json_path):
        console.print(
            f"added [bold]{problem.name}[/bold] to {escape(str(problem.directory))}: "
            f"{escape(signature(problem))}",
            highlight=False,
        )
        if not shipped_kernel(problem, "baseline").is_file():
            console.print(
                "it has no baseline kernel: `accelopt optimize` starts it from a kernel the "
                "executor writes from the reference (or give one with --kernel)",
                highlight=False,
            )
    write_json(json_path, {"name": problem.name, "directory": str(problem.directory)})


@app.command("list")
def list_command(workspace: common.WorkspaceOption = None, json_path: JsonOption = None) -> None:
    """The workspace's problems (``accelopt bench list`` shows the suite's too)."""
    rows: list[dict[str, Any]] = []
    for name in workspace_names(workspace):
        try:
            p = load_problem(name, workspace)
        except UserError as exc:
            rows.append({"name": name, "error": str(exc)})
            continue
        rows.append(
            {
                "name": name,
                "signature": signature(p),
                "workloads": sorted(p.workloads),
                "baseline": shipped_kernel(p, "baseline").is_file(),
                "requires": list(p.requires),
                "directory": str(p.directory),
            }
        )
    if shows_table(json_path):
        table = Table(title=f"problems in {problems_dir(workspace)}", title_justify="left")
        for col in ("problem", "signature", "workloads", "baseline", "needs"):
            table.add_column(col)
        for r in rows:
            if "error" in r:
                table.add_row(r["name"], f"[red]{escape(r['error'])}[/red]", "", "", "")
                continue
            table.add_row(
                r["name"],
                escape(r["signature"]),
                ", ".join(r["workloads"]),
                "yes" if r["baseline"] else "no (drafted)",
                ", ".join(r["requires"]),
            )
        console.print(table if rows else "no problems in this workspace yet", highlight=False)
    write_json(json_path, rows)


@app.command("remove")
def remove_command(
    name: Annotated[str, typer.Argument(help="a workspace problem")],
    workspace: common.WorkspaceOption = None,
) -> None:
    """Delete a workspace problem (its runs stay in the store; resuming them needs it back)."""
    folder = remove_problem(name, common.workspace_dir(workspace))
    console.print(f"removed {name} ({folder})", highlight=False)


def _sets(values: list[str] | None) -> dict[str, int]:
    sets: dict[str, int] = {}
    for value in values or []:
        name, _, number = value.partition("=")
        try:
            sets[name.strip()] = int(number)
        except ValueError:
            raise UserError(
                f"--set {value!r} must be CONST=INTEGER, e.g. --set batch_size=16"
            ) from None
    return sets


@import_app.command("kernelbench")
def import_kernelbench(
    paths: Annotated[
        list[Path], typer.Argument(help="KernelBench problem files, or folders of them")
    ],
    name: Annotated[str | None, typer.Option(help="the problem's name (one file only)")] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="CONST=VALUE: a size for the default workload (repeatable)"),
    ] = None,
    fit: Annotated[
        bool,
        typer.Option("--fit", help="halve the sizes of a workload too big for this machine"),
    ] = False,
    workspace: common.WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """Import KernelBench files: sizes, arguments, reference and cost model, counted."""
    if importlib.util.find_spec("torch") is None:
        hint = views.INSTALL_HINTS["torch"]
        raise UserError(f"importing a KernelBench file needs PyTorch: {hint}")
    from accelopt.problems import kernelbench

    files = [p for p in paths if not p.is_dir()]
    folders = [p for p in paths if p.is_dir()]
    if name is not None and (len(files) != 1 or folders):
        raise UserError("--name names one problem: give exactly one file with it")
    root = problems_dir(common.workspace_dir(workspace))
    root.mkdir(parents=True, exist_ok=True)
    sets, reserved = _sets(set_), suite_names()
    results: list[tuple[Path, Any]] = []
    for path in files:
        try:
            results.append(
                (
                    path,
                    kernelbench.import_file(
                        path, root, name=name, sets=sets, fit=fit, reserved_names=reserved
                    ),
                )
            )
        except kernelbench.ImportRefused as refused:
            results.append((path, refused))
    for folder in folders:
        results += kernelbench.import_dir(folder, root, sets=sets, fit=fit, reserved_names=reserved)
    single = len(files) == 1 and not folders
    _report_imports(results, json_path, "KernelBench import", single)


def _report_imports(
    results: list[tuple[Path, Any]], json_path: str | None, what: str, single: bool
) -> None:

    rows = []
    for path, result in results:
        if not isinstance(result, UserError):  # an importer's Imported
            p = result.problem
            workloads = {w.name: dict(w.sizes) for w in p.workloads.values()}
            rows.append(
                {
                    "file": str(path),
                    "status": "imported",
                    "name": result.name,
                    "signature": signature(p),
                    "notes": list(result.notes),
                    "workloads": workloads,
                }
            )
        else:
            rows.append({"file": str(path), "status": "refused", "reason": str(result.reason)})
    imported = sum(r["status"] == "imported" for r in rows)
    if shows_table(json_path):
        table = Table(title=f"{what}: {imported} of {len(rows)} imported", title_justify="left")
        for col in ("file", "result", "problem / reason"):
            table.add_column(col)
        for r in rows:
            ok = r["status"] == "imported"
            detail = escape(f"{r['name']}: {r['signature']}" if ok else r["reason"])
            table.add_row(
                Path(r["file"]).name,
                "[green]imported[/green]" if ok else "[red]refused[/red]",
                detail,
            )
        console.print(table)
        for r in rows:
            for note in r.get("notes", []):
                err_console.print(f"[dim]{r['name']}: {note}[/dim]", highlight=False)
    write_json(json_path, rows)
    if single and not imported:
        raise UserError(f"{Path(rows[0]['file']).name} was not imported: {rows[0]['reason']}")
    if rows and not imported:
        raise UserError("no file was imported (the table says why)")


export_app = typer.Typer(help="Write workspace or suite problems in another format.")
app.add_typer(export_app, name="export")


@import_app.command("flashinfer")
def import_flashinfer(
    dataset: Annotated[Path, typer.Argument(help="a FlashInfer Trace dataset folder")],
    definition: Annotated[
        list[str] | None, typer.Option(help="import only this definition (repeatable)")
    ] = None,
    workspace: common.WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """Import FlashInfer Trace definitions: each float32 one becomes a problem, its workloads
    named by their uuid (and `cpu`, the smallest)."""
    if importlib.util.find_spec("torch") is None:
        hint = views.INSTALL_HINTS["torch"]
        raise UserError(f"importing a FlashInfer definition needs PyTorch: {hint}")
    if not (dataset / "definitions").is_dir():
        raise UserError(
            f"{dataset} is not a FlashInfer Trace dataset (it has no definitions/ folder)"
        )
    from accelopt.problems import flashinfer

    root = problems_dir(common.workspace_dir(workspace))
    root.mkdir(parents=True, exist_ok=True)
    results = flashinfer.import_dataset(
        dataset, root, definitions=definition or (), reserved_names=suite_names()
    )
    _report_imports(
        [(Path(name), result) for name, result in results],
        json_path,
        "FlashInfer import",
        single=len(definition or ()) == 1,
    )


@export_app.command("flashinfer")
def export_flashinfer(
    name: Annotated[str, typer.Argument(help="a problem (suite or workspace)")],
    out_dir: Annotated[Path, typer.Argument(help="the dataset folder to write")],
    run: Annotated[
        str | None, typer.Option(help="also export this run's best kernel and its evaluations")
    ] = None,
    workspace: common.WorkspaceOption = None,
) -> None:
    """Write a problem as a FlashInfer Trace dataset: its definition and workloads, and with
    --run the run's best kernel as a solution with one trace per workload it was measured on."""
    from accelopt.interop.flashinfer.export import export_problem

    problem = load_problem(name, workspace)
    solution, evaluations, hardware = None, [], None
    if run is not None:
        solution, evaluations, hardware = _run_solution(problem, run, workspace)
    written = export_problem(
        problem, out_dir, solution=solution, evaluations=evaluations, hardware=hardware
    )
    console.print(
        f"wrote {len(written)} files to {out_dir} ({len(evaluations)} traces)", highlight=False
    )


def _run_solution(problem: Problem, run_id: str, workspace: Path | None) -> tuple[Any, Any, Any]:
    """The run's committed best kernel, its cached evaluations on each of the problem's
    workloads, and the ceilings they were scored against."""
    from accelopt.backends.kernel import Kernel
    from accelopt.cli.optimize import open_store
    from accelopt.search.run import committed_best
    from accelopt.search.spec import RunSpec

    with open_store(workspace) as store:
        record = store.get_run(run_id)
        if record is None or record.problem != problem.name:
            raise UserError(
                f"no run {run_id!r} of {problem.name} in the workspace: see `accelopt runs list`"
            )
        best = committed_best(store, record.id)
        if best is None:
            raise UserError(f"run {record.id} has no committed kernel yet")
        kernel = Kernel(best.kernel.source, record.backend, f"{problem.name}_{record.id}")
        found = [
            store.get_evaluation(
                best.hash, problem.name, w, record.hardware, problem_version=problem.fingerprint
            )
            for w in problem.workloads
        ]
    hardware = RunSpec.of(record).hardware_spec  # runs recorded before it have none
    return kernel, [e for e in found if e is not None], hardware
