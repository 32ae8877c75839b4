"""Judging a kernel's outputs against the reference: pure functions on arrays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OutputCheck:
    max_rel_err: float  # inf when the output is unusable
    error: str = ""  # empty when the outputs are within tolerance


def rel_l2_error(out: np.ndarray, ref: np.ndarray) -> float:
    """||out - ref||_2 / ||ref||_2 in float64 (the absolute norm when the reference is zero)."""
    diff = np.linalg.norm((out.astype(np.float64) - ref.astype(np.float64)).ravel())
    scale = np.linalg.norm(ref.astype(np.float64).ravel())
    return float(diff / scale) if scale > 0 else float(diff)


def _unusable(name: str, out: np.ndarray) -> str:
    nan = int(np.isnan(out).sum())
    if nan == out.size:
        return f"output {name!r} was not written (still NaN after the call)"
    if nan:
        return f"output {name!r} has {nan} of {out.size} values NaN (partly written, or NaN)"
    inf = int(np.isinf(out).sum())
    return f"output {name!r} has {inf} infinite values" if inf else ""


def check_outputs(
    names: Sequence[str], outputs: Sequence[np.ndarray], refs: Sequence[np.ndarray], tol: float
) -> OutputCheck:
    """NaN/Inf fail; otherwise the worst relative L2 error must be within ``tol``."""
    worst = 0.0
    for name, out, ref in zip(names, outputs, refs, strict=True):
        if out.shape != ref.shape:
            return OutputCheck(float("inf"), f"reference {name!r} has shape {ref.shape}")
        problem = _unusable(name, out)
        if problem:
            return OutputCheck(float("inf"), problem)
        err = rel_l2_error(out, ref)
        worst = max(worst, err)
        if err > tol:
            return OutputCheck(worst, f"output {name!r}: relative L2 error {err:.3g} > {tol:.1g}")
    return OutputCheck(worst)


def modified_input(
    names: Sequence[str], after: Sequence[np.ndarray], before: Sequence[np.ndarray]
) -> str:
    """The name of the first input whose bits changed during the call, or ''."""
    for name, a, b in zip(names, after, before, strict=True):
        if not np.array_equal(a.view(np.uint32), b.view(np.uint32)):
            return name
    return ""
