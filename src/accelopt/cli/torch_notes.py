"""What a table of the PyTorch kinds (``torch``, ``inductor``, ``max-autotune``) says under it: how
torch ran, how their outputs were made, what compiling took (never timed), or why the columns are
absent."""

from __future__ import annotations

from collections.abc import Sequence

from accelopt.backends.pytorch.backend import (
    COMPILED,
    OUTPUTS,
    form_path,
    not_compiled,
    torch_available,
)
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation

FORMS = ("torch", *COMPILED)
MODES = {"inductor": "default mode", "max-autotune": "mode max-autotune"}


def form_notes(
    kinds: Sequence[str],
    evaluations: Sequence[Evaluation],
    threads: int,
    backend: str,
    kernel: str,
) -> list[str]:
    """The lines under a suite table about its PyTorch columns."""
    if not any(kind in FORMS for kind in kinds):
        wanted = kernel in ("all", *FORMS) and backend == "cpu"
        if wanted and not torch_available():
            return [
                "no torch, inductor or max-autotune column: torch is not installed here (pip "
                "install 'accelopt[triton]' installs its CPU build)"
            ]
        return []
    import torch

    shown = ", ".join(kind for kind in FORMS if kind in kinds)
    lines = [
        f"{shown} columns: torch {torch.__version__}, {threads} threads; outputs "
        f"{OUTPUTS}; the same rotated inputs, clock and checks as every kernel"
    ]
    for kind in COMPILED:
        compiled = [e for e in evaluations if e.kernel == kind and e.compile_s]
        if compiled:
            times = ", ".join(f"{e.problem} {e.compile_s:.1f} s" for e in compiled)
            lines.append(f"{kind}: torch.compile ({MODES[kind]}), compiled before timing: {times}")
    return lines


def uncompiled_notes(problems: Sequence[Problem], kinds: Sequence[str]) -> list[str]:
    """A line for each problem whose PyTorch form is not given to torch.compile, and why (when a
    compiled kind is among ``kinds``)."""
    shown = " and ".join(kind for kind in COMPILED if kind in kinds)
    lines = []
    for problem in problems if shown else ():
        path = form_path(problem)
        why = not_compiled(path.read_text()) if path is not None else ""
        if why:
            lines.append(f"{shown}: no {problem.name} figure: {why}")
    return lines
