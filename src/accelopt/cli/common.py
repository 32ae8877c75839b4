"""What several commands share: resolving the hardware and building the evaluation config."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from accelopt import settings, views
from accelopt.cli.groups import option_group
from accelopt.errors import UserError, read_user_text
from accelopt.hardware.spec import HardwareSpec
from accelopt.profiling.config import EvalConfig
from accelopt.store.errors import StoreError
from accelopt.store.records import RunRecord
from accelopt.store.space import EVAL_FREE_BYTES, cache_places, check_run_space, check_writable
from accelopt.store.store import Store

ProfilerOption = Annotated[
    str, typer.Option("--profiler", help="where kernels are measured: local or ray")
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address", help="a Ray cluster's head HOST:PORT (--profiler ray; default: local Ray)"
    ),
]


# One workload (eval, bench run, prompt): a name or its sizes (``problems.sizes``).
WorkloadOption = Annotated[
    str, typer.Option(help="sizes: cpu, paper, small, tiny, or sizes such as M=512,N=768,K=384")
]

WorkspaceOption = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        help="the run store, memory and your problems (default: $ACCELOPT_WORKSPACE or "
        "./.accelopt)",
    ),
]
RunIdArgument = Annotated[str, typer.Argument(help="run id (or a unique prefix)")]


def hardware_for(backend: str, announce: bool = True) -> HardwareSpec:
    """``views.hardware_for``, saying on the command line's standard error when it measures."""
    from accelopt.cli.output import err_console

    def say(message: str) -> None:
        err_console.print(f"[dim]{message}[/dim]")

    return views.hardware_for(backend, say if announce else None)


def _workspace(explicit: Path | None, wanted: str) -> tuple[Path, str]:
    """The workspace's path and how to name it in an error; a UserError, saying to give
    ``wanted`` with --workspace, when it is a file."""
    path = settings.workspace_dir(explicit)
    shown = f"{settings.workspace_origin(explicit)} {str(path)!r}"
    if path.exists() and not path.is_dir():
        raise UserError(f"{shown} is a file, not a directory: give {wanted} with --workspace")
    return path, shown


def workspace_dir(explicit: Path | None) -> Path:
    """The workspace (``settings.workspace_dir``), made when missing; a UserError when it is a
    file or cannot be made or written."""
    path, shown = _workspace(
        explicit, "a directory (made when missing) for the run store and memory"
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


def run_workspace(explicit: Path | None, need_bytes: int | None = None) -> Path:
    """``workspace_dir``, checked before a run starts: it and the cache's folders can be written
    and hold ``need_bytes`` free (default ``store.space.MIN_FREE_BYTES``); else one sentence
    naming the folder."""
    path = workspace_dir(explicit)
    check_run_space(path, need_bytes)
    return path


def check_cache_space(need_bytes: int = EVAL_FREE_BYTES) -> None:
    """The cache's folders can be written and hold ``need_bytes`` free (``eval``, ``bench``)."""
    check_writable(cache_places(), need_bytes)


def open_store_readonly(explicit: Path | None) -> Store:
    """The workspace's store for reading only (``runs``, ``report``): nothing is created or
    written, so a read-only workspace (an archived run) is read as it is; a workspace without a
    store is an empty one."""
    path, shown = _workspace(explicit, "the directory of the run store")
    above = next((p for p in path.parents if p.exists()), path)
    if not path.exists() and not above.is_dir():
        raise UserError(
            f"{shown} cannot be made ({str(above)!r} is a file): give a directory with --workspace"
        )
    try:
        return Store.open_readonly(path)
    except UserError:  # a full, damaged or newer store: its sentence says what to do
        raise
    except (OSError, sqlite3.Error, StoreError) as exc:
        raise UserError(
            f"cannot read the run store in {shown} ({exc}): give another directory with --workspace"
        ) from None


KERNEL_HINT = "give the path to a kernel source (.c for cpu, .py for triton)"


def read_kernel_file(path: Path) -> str:
    return read_user_text(path, "kernel file", KERNEL_HINT)


@option_group("Timing")
@dataclass(frozen=True)
class Timing:
    """How each kernel is checked and timed (``eval``, ``bench run`` and ``optimize``)."""

    seeds: Annotated[int, typer.Option(help="fresh input seeds for the correctness check")] = 5
    min_calls: Annotated[int, typer.Option(help="timed calls, at least")] = 20
    min_time: Annotated[float, typer.Option(help="seconds of timed calls, at least")] = 0.2
    threads: Annotated[int | None, typer.Option(help="OpenMP threads (default: all cores)")] = None

    def config(self, workers: int, check_only: bool = False) -> EvalConfig:
        """The evaluation settings; a UserError naming a bad one."""
        try:
            return EvalConfig(
                check_only=check_only,
                seeds=self.seeds,
                min_calls=self.min_calls,
                min_time_s=self.min_time,
                threads=self.threads,
                workers=workers,
            )
        except ValueError as exc:
            raise UserError(f"invalid evaluation option: {one_line(exc)}") from None


def find_run(store: Store, ref: str) -> RunRecord:
    """Run ``ref`` (an id or a unique prefix), or a UserError that says where to look."""
    run = store.get_run(ref)
    if run is None:
        raise UserError(f"no run {ref!r} in {store.path}: see `accelopt runs list`")
    return run


def one_line(exc: ValueError) -> str:
    """A validation error on one line: the first field at fault and what is wrong with it."""
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first.get("loc", ()))
        return f"{field.replace('_', '-')}: {first['msg']}" if field else first["msg"]
    return " ".join(str(exc).split())
