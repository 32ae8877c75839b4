"""``accelopt bench``: the suite — list its problems, run its kernels."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from accelopt.backends.kernel import Kernel
from accelopt.cli import common
from accelopt.cli.output import console, evaluation_json, evaluations_table, shows_table, write_json
from accelopt.errors import UserError
from accelopt.problems.loader import list_problems, load_problem
from accelopt.problems.records import Problem
from accelopt.profiling.service import Evaluator

app = typer.Typer(
    help="The benchmark suite: list problems, run their kernels.", no_args_is_help=True
)

JsonOption = Annotated[
    str | None, typer.Option("--json", help="also write JSON to this path ('-' for stdout)")
]


def _sizes(problem: Problem, workload: str) -> str:
    sizes = problem.workloads.get(workload)
    return " ".join(f"{k}={v}" for k, v in sizes.sizes.items()) if sizes else "—"


def problem_json(problem: Problem) -> dict[str, Any]:
    return {
        "name": problem.name,
        "description": problem.description,
        "params": list(problem.params),
        "inputs": [{"name": t.name, "shape": list(t.shape)} for t in problem.inputs],
        "outputs": [{"name": t.name, "shape": list(t.shape)} for t in problem.outputs],
        "tolerance": problem.tolerance,
        "workloads": {w.name: dict(w.sizes) for w in problem.workloads.values()},
    }


@app.command("list")
def list_command(json_path: JsonOption = None) -> None:
    """The problems of the suite with their workloads."""
    problems = [load_problem(name) for name in list_problems()]
    if shows_table(json_path):
        table = Table(title="accelopt suite", title_justify="left")
        for col in ["problem", "signature", "cpu sizes", "paper sizes", "tolerance"]:
            table.add_column(col)
        for p in problems:
            signature = ", ".join(f"{t.name}[{','.join(t.shape)}]" for t in p.inputs)
            signature += " → " + ", ".join(f"{t.name}[{','.join(t.shape)}]" for t in p.outputs)
            table.add_row(
                p.name, signature, _sizes(p, "cpu"), _sizes(p, "paper"), f"{p.tolerance:g}"
            )
        console.print(table)
    write_json(json_path, [problem_json(p) for p in problems])


def _selected(names: list[str] | None) -> list[Problem]:
    return [load_problem(n) for n in (names or list_problems())]


@app.command("run")
def run_command(
    problem: Annotated[
        list[str] | None, typer.Option("--problem", help="run only this problem (repeatable)")
    ] = None,
    backend: Annotated[str, typer.Option(help="kernel language/device")] = "cpu",
    workload: Annotated[str, typer.Option(help="sizes: cpu or paper")] = "cpu",
    kernel: Annotated[str, typer.Option(help="which shipped kernel: baseline")] = "baseline",
    check_only: Annotated[bool, typer.Option("--check-only", help="skip timing")] = False,
    seeds: Annotated[int, typer.Option(help="fresh input seeds per kernel")] = 5,
    min_calls: Annotated[int, typer.Option(help="timed calls, at least")] = 20,
    min_time: Annotated[float, typer.Option(help="seconds of timed calls, at least")] = 0.2,
    threads: Annotated[int | None, typer.Option(help="OpenMP threads (default: all cores)")] = None,
    workers: Annotated[int, typer.Option(help="worker processes checking in parallel")] = 2,
    json_path: JsonOption = None,
) -> None:
    """Evaluate the suite's shipped kernels: one row per problem."""
    if kernel != "baseline":
        raise UserError(f"unknown kernel kind {kernel!r}; the suite ships: baseline")
    problems = [common.problem_and_workload(p.name, workload) for p in _selected(problem)]
    config = common.eval_config(check_only, seeds, min_calls, min_time, threads, workers)
    hardware = common.hardware_for(backend)
    jobs = []
    for p in problems:
        path = p.kernel_path(kernel, backend)
        if not path.is_file():
            raise UserError(f"problem {p.name!r} ships no {kernel} kernel for backend {backend!r}")
        jobs.append((Kernel(path.read_text(), backend, kernel), p, workload))
    with Evaluator(hardware, config) as evaluator:
        evaluations = list(evaluator.evaluate_many(jobs))
    if shows_table(json_path):
        threads = f"{evaluator.threads} threads"
        title = f"{kernel} kernels / {workload} workload on {hardware.name} ({threads})"
        console.print(evaluations_table(evaluations, title))
    write_json(json_path, [evaluation_json(e) for e in evaluations])
