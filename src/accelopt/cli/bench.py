"""``accelopt bench``: the suite — list its problems, run its kernels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from accelopt import views
from accelopt.backends.kernel import Kernel
from accelopt.backends.numpy.backend import blas_description, reference_kernel
from accelopt.backends.pytorch.backend import form_kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.cli import common
from accelopt.cli.groups import with_groups
from accelopt.cli.output import (
    JsonOption,
    console,
    err_console,
    isolation_warnings,
    shows_table,
    suite_table,
    timing_warnings,
    writable_option,
    write_json,
)
from accelopt.cli.torch_notes import FORMS, form_notes, uncompiled_notes
from accelopt.errors import UserError
from accelopt.formatting import milliseconds
from accelopt.hardware.cache import describe_figure
from accelopt.hardware.measure import CEILINGS
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.loader import list_problems, load_problem
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.factory import make_profiler
from accelopt.profiling.parent.rescoring import lowers_a_ceiling, rescore_all
from accelopt.profiling.profiler import evaluate_all
from accelopt.reports.suite_report import suite_report, write_suite_report
from accelopt.views import evaluation_json, problem_json, problem_show_json

app = typer.Typer(
    help="The benchmark suite: list problems, run their kernels.", no_args_is_help=True
)

KINDS = ("baseline", "expert", "numpy", "torch", "inductor", "max-autotune")


def _sizes(problem: Problem, workload: str) -> str:
    sizes = problem.workloads.get(workload)
    return " ".join(f"{k}={v}" for k, v in sizes.sizes.items()) if sizes else "—"


@app.command("list")
def list_command(workspace: common.WorkspaceOption = None, json_path: JsonOption = None) -> None:
    """The problems: the suite's and the workspace's, with their workloads."""
    problems = [load_problem(name, workspace) for name in list_problems(workspace)]
    if shows_table(json_path):
        table = Table(title="accelopt problems", title_justify="left")
        columns = ["problem", "from", "signature", "cpu sizes", "published sizes", "tolerance"]
        for col in columns:
            table.add_column(col)
        for p in problems:
            published = "paper" if "paper" in p.workloads else "source"  # suite / KernelBench
            signature, tolerance = escape(_signature(p)), f"{p.tolerance:g}"
            table.add_row(
                p.name, p.origin, signature, _sizes(p, "cpu"), _sizes(p, published), tolerance
            )
        console.print(table)
    write_json(json_path, [problem_json(p) for p in problems])


def _selected(names: list[str] | None, workspace: Path | None) -> list[Problem]:
    return [load_problem(n, workspace) for n in (names or list_problems(workspace))]


def suite_kernel(problem: Problem, kind: str, backend: str) -> Kernel | None:
    """The shipped kernel of a kind for a problem, or None when the suite has none."""
    if kind == "numpy":  # a CPU comparison: it would be scored against another device's roofline
        return reference_kernel(problem) if backend == "cpu" else None
    if kind in FORMS:  # CPU comparisons too (torch's CPU build)
        return form_kernel(problem, kind) if backend == "cpu" else None
    path = shipped_kernel(problem, kind, backend)
    return Kernel(path.read_text(), backend, kind) if path.is_file() else None


def _kinds(kernel: str) -> tuple[str, ...]:
    """The kinds ``--kernel`` names: one, several separated by commas, or all."""
    if kernel == "all":
        return KINDS
    names = [name.strip() for name in kernel.split(",") if name.strip()]
    unknown = [name for name in names if name not in KINDS]
    if unknown or not names:
        raise UserError(
            f"unknown kernel kind {(unknown or [kernel])[0]!r}; choose {', '.join(KINDS)} or all "
            "(several: separated by commas)"
        )
    return tuple(kind for kind in KINDS if kind in names)


HtmlOption = Annotated[
    Path | None,
    typer.Option(
        "--html", help="also write an HTML report with charts", callback=writable_option("--html")
    ),
]


@app.command("run")
@with_groups
def run_command(
    timing: common.Timing,
    problem: Annotated[
        list[str] | None, typer.Option("--problem", help="run only this problem (repeatable)")
    ] = None,
    backend: Annotated[str, typer.Option(help="kernel language/device")] = "cpu",
    workload: common.WorkloadOption = "cpu",
    kernel: Annotated[
        str,
        typer.Option(
            help="which kernels: baseline, expert, numpy, torch, inductor, max-autotune, several "
            "separated by commas, or all"
        ),
    ] = "all",
    check_only: Annotated[bool, typer.Option("--check-only", help="skip timing")] = False,
    workers: Annotated[int, typer.Option(help="worker processes checking in parallel")] = 2,
    html: HtmlOption = None,
    profiler: common.ProfilerOption = "local",
    ray_address: common.RayAddressOption = None,
    workspace: common.WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """Evaluate the problems' own kernels, NumPy and PyTorch (eager and torch.compile): one row
    per problem, % of peak per kind, the best reference and the expert's time over it (without
    --problem: every problem that has the workload)."""
    kinds = _kinds(kernel)
    selected = _selected(problem, workspace)
    if not problem:  # a workload given by its sizes: the problems of those size parameters
        selected = [p for p in selected if p.has_workload(workload)]
    problems = [views.problem_and_workload(p.name, workload, workspace) for p in selected]
    config = timing.config(workers, check_only=check_only)
    common.check_cache_space()  # the kernels are compiled there: told before any work
    start = common.hardware_for(backend)
    jobs, kinds = _suite_jobs(problems, kinds, backend, workload)
    if not jobs:
        raise UserError(f"the selected problems ship no {kernel} kernel for backend {backend!r}")
    with make_profiler(profiler, start, config, ray_address=ray_address) as prof:
        evaluations = evaluate_all(prof, jobs)
        threads = prof.threads
        hardware = prof.hardware  # a ceiling a kernel beat may have been raised meanwhile
    evaluations, note = _against_one_ceiling(evaluations, problems, start, hardware)
    if note:
        err_console.print(note, highlight=False, markup=False)
    units = f"{hardware.cores} SMs" if backend == "triton" else f"{threads} threads"
    title = f"{workload} workload on {hardware.name} ({units}, {profiler} profiler)"
    blas = [f"numpy column: {blas_description(threads)}"] if "numpy" in kinds else []
    blas += form_notes(kinds, evaluations, threads, backend, kernel)
    blas += uncompiled_notes(problems, kinds)
    if html is not None:
        report = suite_report(evaluations, problems, hardware, kinds, title, blas)
        path = write_suite_report(html, report)
        err_console.print(f"suite report written to {path}", highlight=False)
    if shows_table(json_path):
        console.print(suite_table(problems, kinds, evaluations, title, hardware))
        _print_errors_and_notes(evaluations, blas)
    for line in timing_warnings(evaluations) + isolation_warnings(evaluations):
        err_console.print(line, style="yellow", highlight=False, markup=False)
    write_json(json_path, [evaluation_json(e, hardware) for e in evaluations])


def _suite_jobs(
    problems: list[Problem], kinds: tuple[str, ...], backend: str, workload: str
) -> tuple[list[tuple[Kernel, Problem, str]], tuple[str, ...]]:
    """The (kernel, problem, workload) of every shipped kernel of ``kinds``, and the kinds that
    have one (the table's columns)."""
    jobs = [
        (k, p, p.workload_name(workload))  # one given by its sizes: its canonical name
        for p in problems
        for kind in kinds
        if (k := suite_kernel(p, kind, backend)) is not None
    ]
    return jobs, tuple(kind for kind in kinds if any(k.name == kind for k, _, _ in jobs))


def _print_errors_and_notes(evaluations: list[Evaluation], notes: list[str]) -> None:
    """Under the table: each kernel's error, then the notes (how NumPy's BLAS is set up)."""
    for e in evaluations:
        if e.error:
            console.print(f"{e.problem} / {e.kernel}: {e.status.value}: {e.error}", markup=False)
    for note in notes:
        console.print(note, highlight=False)


def _against_one_ceiling(
    evaluations: list[Evaluation],
    problems: list[Problem],
    start: HardwareSpec,
    final: HardwareSpec,
) -> tuple[list[Evaluation], str]:
    """One table, one report, one JSON: every evaluation re-scored against ``final``, the spec
    the profiler ended with (a ceiling a kernel beat may have been raised during the run), and
    what to tell about it ("" when nothing changed). Evaluations scored against higher ceilings
    than ``final`` (raised where the profiler could not see it) are left as they were."""
    rescored = rescore_all(evaluations, {p.name: p for p in problems}, final)
    if lowers_a_ceiling(evaluations, rescored):
        keys = sorted({e.hardware for e in evaluations})
        return evaluations, (
            f"warning: the kernels were scored against {len(keys)} sets of ceilings of "
            f"{final.name} ({', '.join(keys)}; the --json 'ceilings' of each row say which): "
            "compare their % of peak with care, or run again"
        )
    return rescored, _raised_note(start, final) if final.key() != start.key() else ""


def _raised_note(before: HardwareSpec, after: HardwareSpec) -> str:
    """What to tell when a ceiling was raised during the run (every row is scored again)."""
    raised = [
        f"{name} {describe_figure(name, getattr(before, name))} → "
        f"{describe_figure(name, getattr(after, name))}"
        for name in CEILINGS
        if getattr(after, name) != getattr(before, name)
    ]
    changed = ", ".join(raised) or f"{before.key()} → {after.key()}"
    return (
        f"note: a kernel beat a cached ceiling and it was re-measured during the run ({changed}): "
        "every row is scored against the ceilings the run ended with"
    )


@app.command("show")
def show_command(
    name: Annotated[str, typer.Argument(help="problem name (see `accelopt bench list`)")],
    backend: Annotated[str, typer.Option(help="whose ceilings and baseline to show")] = "cpu",
    workspace: common.WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """One problem: definition, kernel arguments, workloads with their cost (and how it was
    obtained) and roofline, and the baseline source."""
    problem = load_problem(name, workspace)
    hardware = common.hardware_for(backend)
    payload = problem_show_json(problem, hardware, backend)
    costs, source, shipped = payload["costs"], payload["baseline_source"], payload["kernels"]
    baseline = shipped_kernel(problem, "baseline", backend)
    if shows_table(json_path):
        title = f"[bold]{problem.name}[/bold]: {escape(problem.description)}"
        console.print(title, highlight=False)
        console.print(
            f"signature: {_signature(problem)}   tolerance: {problem.tolerance:g}\n"
            f"from: {problem.origin} ({problem.directory})",
            highlight=False,
            markup=False,
        )
        console.print(_arguments_table(problem))
        console.print(f"kernels ({backend}): {', '.join(shipped) or 'none'}")
        console.print(_costs_table(costs, hardware))
        for term, note in problem.cost_notes.items():
            console.print(f"  {term}: {note}", highlight=False, markup=False)
        if source:
            lexer = "python" if baseline.suffix == ".py" else "c"
            console.print(Syntax(source, lexer, line_numbers=True, word_wrap=True))
        else:
            console.print("no baseline kernel: `accelopt optimize` drafts one from the reference")
    write_json(json_path, payload)


def _signature(problem: Problem) -> str:
    ins = ", ".join(f"{t.name}[{','.join(t.shape)}]" for t in problem.inputs)
    outs = ", ".join(f"{t.name}[{','.join(t.shape)}]" for t in problem.outputs)
    return f"{ins} → {outs}"


def _arguments_table(problem: Problem) -> Table:
    """The kernel's arguments in call order, with their shapes in size parameters and on each
    workload."""
    table = Table(title="kernel arguments (float32, contiguous)", title_justify="left")
    for col in ["#", "argument", "kind", "shape", *problem.workloads]:
        table.add_column(col, justify="right" if col == "#" else "left")
    tensors = [("input", t) for t in problem.inputs] + [("output", t) for t in problem.outputs]
    for i, (kind, t) in enumerate(tensors):
        dims = [
            "×".join(str(d) for d in t.dims(w.sizes)) or "scalar"
            for w in problem.workloads.values()
        ]
        table.add_row(str(i), t.name, kind, escape(f"[{', '.join(t.shape)}]"), *dims)
    return table


def _costs_table(costs: list[dict[str, Any]], hardware: HardwareSpec) -> Table:
    table = Table(title=f"cost model and roofline on {hardware.name}", title_justify="left")
    for col in ["workload", "sizes", "matmul GFLOP", "vector GFLOP", "MB", "bound", "peak ms"]:
        table.add_column(col, justify="left" if col in {"workload", "sizes", "bound"} else "right")
    for c in costs:
        table.add_row(
            c["workload"],
            " ".join(f"{k}={v}" for k, v in c["sizes"].items()),
            f"{c['matmul_flops'] / 1e9:.4g}",
            f"{c['vector_flops'] / 1e9:.4g}",
            f"{c['bytes'] / 1e6:.4g}",
            c["bound"],
            milliseconds(c["peak_s"]),
        )
    return table
