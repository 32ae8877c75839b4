"""What several commands share: resolving the hardware and building the evaluation config."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from accelopt.errors import UserError
from accelopt.hardware.cache import load_cpu_spec, measure_and_cache
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
        spec = measure_and_cache()
    return spec


def problem_and_workload(name: str, workload: str) -> Problem:
    problem = load_problem(name)
    try:
        problem.workload(workload)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    return problem


def read_kernel_file(path: Path) -> str:
    if not path.is_file():
        raise UserError(
            f"kernel file {str(path)!r} does not exist: give the path to a kernel source "
            "(.c for cpu, .py for triton)"
        )
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read kernel file {str(path)!r}: {exc}") from None


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
        raise UserError(f"invalid evaluation option: {exc}") from None
