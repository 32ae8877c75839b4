"""The numerical check that a match computes its problem, before anything is swapped: the
subgraph on random inputs of the real shapes against the problem's reference (float64) on the
same inputs, at the problem's tolerance (relative L2 error, as every evaluation)."""

from __future__ import annotations

from typing import Any

import numpy as np

from accelopt.model import graphs as g
from accelopt.model.matching import Match
from accelopt.model.subgraphs import extract, node_values, problem_args
from accelopt.problems.records import Problem


def relative_error(got: Any, want: Any) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return float("inf")
    scale = float(np.linalg.norm(want))
    return float(np.linalg.norm(got - want)) / (scale if scale > 0 else 1.0)


def confirm(match: Match, problem: Problem, seed: int = 0) -> tuple[float, str]:
    """(the worst relative error, "" or why the match is not the problem)."""
    import torch

    shapes = [g.shape(n) for n in match.inputs]
    if any(s is None for s in shapes):
        return float("nan"), "an input's shape is not static"
    gen = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(s, generator=gen) for s in shapes]  # type: ignore[arg-type]
    with torch.no_grad():
        got = extract(match)(*inputs)
        args = problem_args(match.args, inputs)
    want = problem.reference(*[a.double().numpy() for a in args])
    wanted = [torch.from_numpy(np.asarray(w)) for w in want]
    expected = node_values(match.layout, wanted, [o.shape for o in got])
    worst = max(relative_error(o.numpy(), e.numpy()) for o, e in zip(got, expected, strict=True))
    if not worst <= problem.tolerance:
        return worst, (
            f"it computes something else: relative error {worst:.3g} against {problem.name}'s "
            f"reference (tolerance {problem.tolerance:g})"
        )
    return worst, ""
