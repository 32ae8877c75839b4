"""What a table of the ``torch`` and ``inductor`` kinds says under it: how torch ran, how their
outputs were made, what Inductor's compiling took (never timed), or why the columns are absent."""

from __future__ import annotations

from collections.abc import Sequence

from accelopt.backends.pytorch.backend import OUTPUTS, form_path, not_compiled, torch_available
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation

FORMS = ("torch", "inductor")


def form_notes(
    kinds: Sequence[str], evaluations: Sequence[Evaluation], threads: int, backend: str,
    kernel: str,
) -> list[str]:  # fmt: skip
    """The lines under a suite table about its PyTorch columns."""
    if not any(kind in FORMS for kind in kinds):
        wanted = kernel in ("all", *FORMS) and backend == "cpu"
        if wanted and not torch_available():
            return [
                "no torch or inductor column: torch is not installed here (pip install "
                "'accelopt[triton]' installs its CPU build)"
            ]
        return []
    import torch

    lines = [
        f"torch and inductor columns: torch {torch.__version__}, {threads} threads; outputs "
        f"{OUTPUTS}; the same rotated inputs, clock and checks as every kernel"
    ]
    compiled = [e for e in evaluations if e.kernel == "inductor" and e.compile_s]
    if compiled:
        times = ", ".join(f"{e.problem} {e.compile_s:.1f} s" for e in compiled)
        lines.append(f"inductor: torch.compile (default mode), compiled before timing: {times}")
    return lines


def uncompiled_notes(problems: Sequence[Problem]) -> list[str]:
    """A line for each problem whose PyTorch form is not given to torch.compile, and why."""
    lines = []
    for problem in problems:
        path = form_path(problem)
        why = not_compiled(path.read_text()) if path is not None else ""
        if why:
            lines.append(f"inductor: no {problem.name} column: {why}")
    return lines
