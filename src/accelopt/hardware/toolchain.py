"""The system C compiler, as ``CC`` names it: found once, checked by running ``--version``, with
the machine it targets (``-dumpmachine``) and the target flags kernels are built with.

Used to build the CPU micro-benchmarks here and, in the cpu backend, kernels.
"""

from __future__ import annotations

import platform
import shlex
import subprocess
from dataclasses import dataclass
from functools import cache

from accelopt import settings
from accelopt.errors import CompilerNotFoundError

# Architectures whose GCC spells "tune and target this CPU" -mcpu=, not -march=.
MCPU_ARCHES = ("aarch64", "arm64", "arm", "powerpc", "ppc")


@dataclass(frozen=True)
class Compiler:
    """A C compiler command that ran, with the first line of its ``--version`` and the machine
    it builds for (``-dumpmachine``, e.g. ``x86_64-linux-gnu``; "" when it does not say)."""

    command: tuple[str, ...]
    version: str
    machine: str = ""

    @property
    def arch(self) -> str:
        """The target architecture: ``x86_64``, ``aarch64``, ... (the host's when unknown)."""
        return self.machine.split("-")[0] if self.machine else host_arch()

    @property
    def cross(self) -> bool:
        """Whether it builds for another architecture than this machine's."""
        return normal_arch(self.arch) != normal_arch(host_arch())


def host_arch() -> str:
    return platform.machine() or "unknown"


def normal_arch(arch: str) -> str:
    """One spelling per architecture: ``amd64`` is ``x86_64``, ``arm64`` is ``aarch64``."""
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(arch.lower(), arch.lower())


def target_flags(compiler: Compiler) -> tuple[str, ...]:
    """The flag that picks the instruction set: ``-march=native`` (``-mcpu=native`` on aarch64),
    or the CPU that ``ACCELOPT_CPU_TARGET`` names (e.g. ``x86-64-v3``, ``neoverse-n1``,
    ``armv8.2-a+sve``). A cross compiler has no ``native``: without a target it uses its default."""
    target = settings.cpu_target()
    if target is None and compiler.cross:
        return ()
    target = target or "native"
    uses_mcpu = normal_arch(compiler.arch).startswith(MCPU_ARCHES) and not target.startswith("armv")
    return (f"-mcpu={target}",) if uses_mcpu else (f"-march={target}",)


def no_compiler(detail: str) -> CompilerNotFoundError:
    return CompilerNotFoundError(f"no working C compiler ({detail}): install gcc or set CC")


def first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0].strip() if lines else "no output"


def _dumpmachine(command: tuple[str, ...]) -> str:
    try:
        proc = subprocess.run(
            [*command, "-dumpmachine"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def find_compiler(cc: str | None = None) -> Compiler:
    """The compiler of ``cc`` (default ``settings.c_compiler()``), checked by running
    ``--version``."""
    name = cc if cc is not None else settings.c_compiler()
    try:
        command = tuple(shlex.split(name))
    except ValueError as exc:  # unbalanced quotes in CC
        raise no_compiler(f"CC={name!r} cannot be parsed: {exc}") from exc
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
    return Compiler(command=command, version=first_line(proc.stdout), machine=_dumpmachine(command))


@cache
def compiler_for(cc: str) -> Compiler:
    """The working compiler named by ``CC`` (checked once per process); raises
    CompilerNotFoundError with one sentence when there is none."""
    del cc  # the cache key: find_compiler reads the same setting
    return find_compiler()
