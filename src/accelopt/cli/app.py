"""``accelopt``: the command-line entry point.

Exit codes: 0 when the command ran (a failing kernel is a result, not an error); 2 for usage
errors (unknown problem, missing file, no C compiler), with one sentence saying what to do.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from accelopt import __version__, views
from accelopt.backends.kernel import Kernel
from accelopt.cli import (
    bench,
    common,
    export,
    llm,
    mcp_server,
    memory,
    model,
    optimize,
    prompt,
    report,
    runs,
    serve,
    worker,
)
from accelopt.cli import problem as problem_cli
from accelopt.cli import store as store_cli
from accelopt.cli.cells import is_cut
from accelopt.cli.errors import disk_sentence
from accelopt.cli.groups import with_groups
from accelopt.cli.output import (
    JsonOption,
    console,
    err_console,
    evaluations_table,
    isolation_warnings,
    shows_table,
    timing_warnings,
    write_json,
)
from accelopt.errors import UserError
from accelopt.problems.loader import UnknownProblemError
from accelopt.profiling.factory import make_profiler
from accelopt.views import evaluation_json

app = typer.Typer(
    help="accelopt: make compute kernels faster with LLM agents, measured against the roofline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(bench.app, name="bench")
app.add_typer(llm.app, name="llm")
app.add_typer(runs.app, name="runs")
app.add_typer(model.app, name="model")
app.add_typer(memory.app, name="memory")
app.add_typer(problem_cli.app, name="problem")
app.add_typer(store_cli.app, name="store")
app.command("optimize")(optimize.optimize_command)
app.command("export")(export.export_command)
app.command("report")(report.report_command)
runs.app.command("compare")(report.compare_command)
app.command("worker")(worker.worker_command)
app.command("prompt")(prompt.prompt_command)
app.command("serve")(serve.serve_command)
app.command("mcp")(mcp_server.mcp_command)


def _print_version(asked: bool) -> None:
    if asked:
        console.print(f"accelopt {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="print accelopt's version and exit",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """accelopt: make compute kernels faster with LLM agents, measured against the roofline."""


@app.command("eval")
@with_groups
def eval_command(
    problem: Annotated[str, typer.Argument(help="problem name (see `accelopt bench list`)")],
    kernel_file: Annotated[
        Path, typer.Argument(help="the kernel source: a .c file (cpu), a .py module (triton)")
    ],
    timing: common.Timing,
    backend: Annotated[str, typer.Option(help="kernel language/device")] = "cpu",
    workload: Annotated[str, typer.Option(help="sizes: cpu, paper, small or tiny")] = "cpu",
    check_only: Annotated[bool, typer.Option("--check-only", help="skip timing")] = False,
    profiler: common.ProfilerOption = "local",
    ray_address: common.RayAddressOption = None,
    workspace: common.WorkspaceOption = None,
    json_path: JsonOption = None,
) -> None:
    """Check and time one kernel file against a problem's reference and roofline."""
    prob = views.problem_and_workload(problem, workload, workspace)
    common.check_cache_space()  # its kernels are compiled there
    kernel = Kernel(common.read_kernel_file(kernel_file), backend, kernel_file.name)
    config = timing.config(workers=1, check_only=check_only)
    hardware = common.hardware_for(backend)
    with make_profiler(profiler, hardware, config, ray_address=ray_address) as prof:
        evaluation = prof.evaluate(kernel, prob, workload)
        hardware = prof.hardware  # a ceiling the evaluation beat is re-measured meanwhile
    if shows_table(json_path):
        title = f"{problem} / {workload} on {hardware.name}"
        console.print(evaluations_table([evaluation], title, [prob], hardware))
        if is_cut(evaluation.error):  # the cell showed it whole: not twice
            # verbatim: compiler output is full of [j] that markup would take for tags
            console.print(f"[bold]error:[/bold] {escape(evaluation.error)}", highlight=False)
        if evaluation.log:
            console.print("[bold]kernel output:[/bold]")
            console.print(evaluation.log[:2000], markup=False, highlight=False)
    for line in timing_warnings([evaluation]) + isolation_warnings([evaluation]):
        err_console.print(line, style="yellow", highlight=False, markup=False)
    write_json(json_path, evaluation_json(evaluation, hardware))


@app.command("hardware")
def hardware_command(
    measure: Annotated[
        bool, typer.Option("--measure", help="measure this machine's ceilings again and cache them")
    ] = False,
    backend: Annotated[
        str, typer.Option(help="whose device: cpu (this CPU) or triton (this machine's GPU)")
    ] = "cpu",
    json_path: JsonOption = None,
) -> None:
    """Show the ceilings the roofline uses: this machine (measured) and datasheet devices."""
    from accelopt.cli.hardware import show_hardware

    show_hardware(measure, json_path, backend)


def command() -> Any:
    """The command typer makes of ``app``, a flag's help without a ``<bool>`` metavar."""
    root = typer.main.get_command(app)
    _hide_flag_metavars(root)
    return root


def _hide_flag_metavars(cmd: Any) -> None:
    for param in cmd.params:
        if getattr(param, "is_flag", False):  # typer's own option class, not click's
            param.metavar = ""  # a flag takes no value: "--check-only <bool>" read as if it did
    made = cmd.get_help_option  # --help is made per context, and is a flag too

    def help_option(ctx: Any) -> Any:
        option = made(ctx)
        if option is not None:
            option.metavar = ""
        return option

    cmd.get_help_option = help_option
    for sub in getattr(cmd, "commands", {}).values():
        _hide_flag_metavars(sub)


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C: said at once, then the KeyboardInterrupt that stops the command (typer turns it
    into exit status 130, silently); ``optimize`` replaces this while its search runs."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C: at once
    err_console.print("interrupted (Ctrl-C): stopping", highlight=False, markup=False)
    raise KeyboardInterrupt


def main() -> None:
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored by a shell
        signal.signal(signal.SIGINT, _interrupted)
    try:
        command()()
    except (UserError, UnknownProblemError) as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        sys.exit(2)
    except OSError as exc:
        sentence = disk_sentence(exc)
        if sentence is None:
            raise
        err_console.print(f"[red]error:[/red] {escape(sentence)}", highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/red]")
        sys.exit(130)
