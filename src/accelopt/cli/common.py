"""What several commands share: resolving the hardware and building the evaluation config."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from accelopt import settings
from accelopt.errors import UserError, read_user_text
from accelopt.hardware.cache import ensure_cpu_spec, load_cpu_spec
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.loader import load_problem
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig

ProfilerOption = Annotated[
    str, typer.Option("--profiler", help="where kernels are measured: local or ray")
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address", help="a Ray cluster's head HOST:PORT (--profiler ray; default: local Ray)"
    ),
]


WorkspaceOption = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        help="the run store, memory and your problems (default: $ACCELOPT_WORKSPACE or "
        "./.accelopt)",
    ),
]


HARDWARE_BACKENDS = ("cpu", "triton")  # backends with a device of their own (numpy runs on cpu's)


def unknown_backend(backend: str) -> str:
    return (
        f"unknown backend {backend!r}; the available backends are: {', '.join(HARDWARE_BACKENDS)}"
    )


def hardware_for(backend: str, announce: bool = True) -> HardwareSpec:
    """The ceilings kernels of ``backend`` are scored against: for cpu, this machine's, measured
    once and cached; for triton, the GPU's (see ``hardware.gpu_spec``)."""
    if backend == "triton":
        from accelopt.hardware.gpu_spec import triton_spec

        return triton_spec()
    if backend != "cpu":
        raise UserError(unknown_backend(backend))
    spec = load_cpu_spec(measure_if_missing=False)
    if spec is None:
        if announce:
            from accelopt.cli.output import err_console

            err_console.print(
                "[dim]measuring this machine's ceilings once (accelopt hardware)[/dim]"
            )
        spec = ensure_cpu_spec()  # measures, unless another process did meanwhile
    return spec


def workspace_dir(explicit: Path | None) -> Path:
    """The workspace (``settings.workspace_dir``), made when missing; a UserError when it is a
    file or cannot be made or written."""
    path = settings.workspace_dir(explicit)
    shown = f"{settings.workspace_origin(explicit)} {str(path)!r}"
    if path.exists() and not path.is_dir():
        raise UserError(
            f"{shown} is a file, not a directory: give a directory (made when missing) for the "
            "run store and memory with --workspace"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"{shown} cannot be made ({exc.strerror or exc}): give a directory you can write "
            "with --workspace"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(
            f"{shown} is not writable: make it writable or give another directory with --workspace"
        )
    return path


def problem_and_workload(
    name: str, workload: str, workspace: Path | None = None, evaluating: bool = True
) -> Problem:
    """The named problem (the suite's or the workspace's) with ``workload``; a UserError when
    the workload is unknown or, ``evaluating``, a module its reference needs is missing."""
    problem = load_problem(name, workspace)
    try:
        problem.workload(workload)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    if evaluating:
        require_modules(problem)
    return problem


INSTALL_HINTS = {
    "torch": "pip install 'accelopt[import]' (the CPU build of torch, and safetensors), or "
    "pip install torch --index-url https://download.pytorch.org/whl/cpu",
    "safetensors": "pip install 'accelopt[import]' or pip install safetensors",
}


def require_modules(problem: Problem) -> None:
    """A UserError naming what to install when a module the problem's reference imports is
    missing here (an imported PyTorch problem needs torch)."""
    for module in problem.requires:
        if importlib.util.find_spec(module) is None:
            hint = INSTALL_HINTS.get(module, f"pip install {module}")
            raise UserError(
                f"problem {problem.name}'s reference needs the Python module {module!r}, which "
                f"is not installed: {hint}"
            )


KERNEL_HINT = "give the path to a kernel source (.c for cpu, .py for triton)"


def read_kernel_file(path: Path) -> str:
    return read_user_text(path, "kernel file", KERNEL_HINT)


def eval_config(
    check_only: bool,
    seeds: int,
    min_calls: int,
    min_time: float,
    threads: int | None,
    workers: int,
) -> EvalConfig:
    try:
        return EvalConfig(
            check_only=check_only,
            seeds=seeds,
            min_calls=min_calls,
            min_time_s=min_time,
            threads=threads,
            workers=workers,
        )
    except ValueError as exc:
        raise UserError(f"invalid evaluation option: {one_line(exc)}") from None


def one_line(exc: ValueError) -> str:
    """A validation error on one line: the first field at fault and what is wrong with it."""
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first.get("loc", ()))
        return f"{field.replace('_', '-')}: {first['msg']}" if field else first["msg"]
    return " ".join(str(exc).split())
