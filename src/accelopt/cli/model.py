"""``accelopt model``: a user's PyTorch model, with the kernels accelopt found swapped in through
its ``torch.compile`` backend: ``profile`` (where the time goes) and ``optimize`` (tune the hot
matches, compile, check against eager, time against eager and Inductor)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import typer

from accelopt.cli import common
from accelopt.cli.groups import option_group, with_groups
from accelopt.cli.model_search import run_optimize, search_unmatched
from accelopt.cli.model_tables import print_optimized, print_profile
from accelopt.cli.output import JsonOption, err_console, shows_table, writable_option, write_json
from accelopt.errors import UserError

app = typer.Typer(
    help="A PyTorch model made faster end to end with accelopt's kernels (torch.compile backend).",
    no_args_is_help=True,
)
InputsOption = Annotated[
    str | None,
    typer.Option(
        help="the inputs: pkg.mod:fn or file.py:fn returning a list of tensors "
        "(default: the target's get_inputs)"
    ),
]
HtmlOption = Annotated[
    Path | None,
    typer.Option(help="also write an HTML report", callback=writable_option("--html")),
]
TargetArgument = Annotated[
    str,
    typer.Argument(
        help="a .py file with Model, get_inputs(), get_init_inputs() (KernelBench's "
        "names), or an importable module (pkg.mod or pkg.mod:Attr)"
    ),
]


def _torch_or_exit() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UserError(
            "accelopt model needs PyTorch: pip install 'accelopt[triton]' (or torch)"
        ) from None


@app.command("profile")
def profile_command(
    target: TargetArgument,
    inputs: InputsOption = None,
    workspace: common.WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """Where the model's time goes on this machine: per matched problem and per remaining op,
    with shares (torch.profiler), and what no problem matched."""
    _torch_or_exit()
    from accelopt.model.loading import load_model
    from accelopt.model.pipeline import profile_model

    result = profile_model(load_model(target, inputs), common.workspace_dir(workspace)).result
    if shows_table(json_path):
        print_profile(result)
    write_json(json_path, asdict(result))


@option_group("Unmatched parts (with an endpoint)")
@dataclass(frozen=True)
class Unmatched:
    """What becomes of the hot parts no problem matches, when an endpoint answers."""

    search: Annotated[
        bool,
        typer.Option(
            "--search/--no-search",
            help="import each hot part no problem matches as a problem of its own and search a "
            "kernel for it with the agents (only when the endpoint answers)",
        ),
    ] = True
    config: Annotated[Path | None, typer.Option(help="LLM config (default ./accelopt.yaml)")] = None
    iterations: Annotated[int, typer.Option(help="iterations of each such search")] = 2
    imports: Annotated[int, typer.Option(help="at most this many parts imported")] = 2


@option_group("Kernels and timing")
@dataclass(frozen=True)
class Swap:
    """The kernels of the matched parts, and the end-to-end timing."""

    tune: Annotated[
        bool,
        typer.Option(
            "--tune/--no-tune",
            help="autotune each hot match's kernel at the model's sizes first (no LLM; a run "
            "already tuned at those sizes is reused)",
        ),
    ] = True
    policy: Annotated[
        str,
        typer.Option(
            help="at sizes no kernel was exported for: compile (build it, check it on first use) "
            "or fallback (the original subgraph)"
        ),
    ] = "compile"
    budget: Annotated[
        float,
        typer.Option(
            help="seconds of the end-to-end timing session (each kernel is also timed "
            "against its subgraph, for at most a quarter of it)"
        ),
    ] = 20.0
    kernels: Annotated[
        str,
        typer.Option(
            help="runs (the workspace's best runs, else the shipped experts) or shipped (the "
            "experts only: no kernel an LLM wrote runs in this process)"
        ),
    ] = "runs"


@app.command("optimize")
@with_groups
def optimize_command(
    target: TargetArgument,
    swap: Swap,
    unmatched: Unmatched,
    inputs: InputsOption = None,
    workspace: common.WorkspaceOption = None,
    html: HtmlOption = None,
    json_path: JsonOption = None,
) -> None:
    """Tune the kernels of the model's hot matches, compile the model with accelopt's backend,
    check its outputs against eager on fresh inputs and time eager, torch.compile (Inductor) and
    accelopt interleaved in one session."""
    _torch_or_exit()
    if swap.policy not in ("compile", "fallback"):
        raise UserError(f"--policy is compile or fallback, not {swap.policy!r}")
    if swap.kernels not in ("runs", "shipped"):
        raise UserError(f"--kernels is runs or shipped, not {swap.kernels!r}")
    from accelopt.model.loading import load_model
    from accelopt.model.pipeline import optimize_model
    from accelopt.model.report import render_html

    ws, u = common.workspace_dir(workspace), unmatched
    tune = swap.tune and swap.kernels == "runs"  # a tuned kernel is a run's
    tuner = (lambda problem, sizes: autotune(problem, sizes, ws)) if tune else None
    searcher = (
        (
            lambda parts, graph: search_unmatched(
                parts, graph, ws, u.config, u.iterations, u.imports, target
            )
        )
        if u.search and swap.kernels == "runs"  # a searched kernel would not be used
        else None
    )
    loaded = load_model(target, inputs)
    result = optimize_model(
        loaded, ws, swap.policy, tuner, swap.budget, searcher, runs=swap.kernels == "runs"
    )
    if shows_table(json_path):
        print_optimized(result)
    if html is not None:
        html.write_text(render_html(result), encoding="utf-8")
        err_console.print(f"report: {html}", highlight=False, markup=False)
    write_json(json_path, asdict(result))


def autotune(problem: str, sizes: dict[str, int], workspace: Path) -> str:
    """Autotune ``problem``'s shipped expert at ``sizes`` (a run of its own, in the workspace)
    unless a run already finished tuning there (one killed half-way is tuned again); a note
    saying which."""
    from accelopt.model.provision import sized_name
    from accelopt.problems.loader import load_problem
    from accelopt.store.records import RunStatus
    from accelopt.store.store import Store

    loaded = load_problem(problem, workspace)
    workload = sized_name(loaded, sizes)
    with Store.open(workspace) as store:
        runs = [
            r
            for r in store.list_runs()
            if r.problem == problem
            and r.best_hash
            and r.status == RunStatus.FINISHED
            and workload in _tuned(r)
        ]
    if runs:
        return f"{problem} at {workload}: reused run {runs[0].id}"
    say = f"autotuning {problem}'s expert at {workload} (accelopt optimize)…"
    options = ("--strategy", "autotune", "--kernel", "expert", "--workload", workload)
    failed = run_optimize(say, problem, workspace, *options)
    if failed is not None:
        return f"{problem} at {workload}: autotune failed ({failed}); the expert as shipped"
    return f"{problem} at {workload}: autotuned (accelopt optimize {problem} --strategy autotune)"


def _tuned(run: object) -> list[str]:
    from accelopt.search.workloads import run_workloads

    return list(run_workloads(run).tuned)  # type: ignore[arg-type]
