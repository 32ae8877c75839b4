"""The system C compiler, as ``CC`` names it: found once, checked by running ``--version``.

Used to build the CPU micro-benchmarks here and, in the cpu backend, kernels.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass

from accelopt import settings
from accelopt.errors import CompilerNotFoundError


@dataclass(frozen=True)
class Compiler:
    """A C compiler command that ran, with the first line of its ``--version``."""

    command: tuple[str, ...]
    version: str


def no_compiler(detail: str) -> CompilerNotFoundError:
    return CompilerNotFoundError(f"no working C compiler ({detail}): install gcc or set CC")


def first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0].strip() if lines else "no output"


def find_compiler() -> Compiler:
    """The compiler of ``settings.c_compiler()``, checked by running ``--version``."""
    try:
        command = tuple(shlex.split(settings.c_compiler()))
    except ValueError as exc:  # unbalanced quotes in CC
        raise no_compiler(f"CC={settings.c_compiler()!r} cannot be parsed: {exc}") from exc
    if not command:
        raise no_compiler("CC is blank")
    shown = " ".join(command)
    try:
        proc = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise no_compiler(f"{shown!r} cannot be run: {exc}") from exc
    if proc.returncode != 0:
        raise no_compiler(f"{shown!r} --version failed: {first_line(proc.stderr)}")
    return Compiler(command=command, version=first_line(proc.stdout))
