"""What the agents see of a problem: plain text and numbers, built from the problem records."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

from accelopt.problems.records import Problem


@dataclass(frozen=True)
class ProblemView:
    name: str
    description: str
    signature: str  # e.g. "x[M,K], w[K,N] -> out[M,N]"
    sizes: dict[str, int]
    reference_source: str
    tolerance: float
    reference_language: str = "NumPy"  # or PyTorch, for an imported problem
    # the sizes of the run's other tuned workloads: the kernel is compiled and scored for each
    also_sizes: tuple[dict[str, int], ...] = ()


def problem_view(problem: Problem, workload: str, also: Sequence[str] = ()) -> ProblemView:
    ins = ", ".join(f"{t.name}[{','.join(t.shape)}]" for t in problem.inputs)
    outs = ", ".join(f"{t.name}[{','.join(t.shape)}]" for t in problem.outputs)
    return ProblemView(
        name=problem.name,
        description=problem.description,
        signature=f"{ins} -> {outs}",
        sizes=dict(problem.workload(workload).sizes),
        reference_source=(problem.reference_text or inspect.getsource(problem.reference)).strip(),
        tolerance=problem.tolerance,
        reference_language="PyTorch" if "torch" in problem.requires else "NumPy",
        also_sizes=tuple(dict(problem.workload(w).sizes) for w in also),
    )
