"""Judging a kernel's outputs against the reference: pure functions on arrays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OutputCheck:
    max_rel_err: float  # inf when the output is unusable
    error: str = ""  # empty when the outputs are within tolerance


CHUNK = 1 << 16  # elements per step: the float64 scratch (512 KiB) stays in cache


def rel_l2_error(out: np.ndarray, ref: np.ndarray) -> float:
    """||out - ref||_2 / ||ref||_2 in float64 (the absolute norm when the reference is zero)."""
    o, r = out.reshape(-1), ref.reshape(-1)
    diff_sq = scale_sq = 0.0
    scratch = np.empty(min(CHUNK, o.size), dtype=np.float64)  # no allocation per step
    for start in range(0, o.size, CHUNK):
        rc = r[start : start + CHUNK]
        rc = rc if rc.dtype == np.float64 else rc.astype(np.float64)
        d = scratch[: rc.size]
        np.subtract(o[start : start + CHUNK], rc, out=d, dtype=np.float64)
        diff_sq += float(d @ d)
        scale_sq += float(rc @ rc)
    diff, scale = np.sqrt(diff_sq), np.sqrt(scale_sq)
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
        err = rel_l2_error(out, ref)
        if not np.isfinite(err):  # NaN or Inf somewhere: say which
            reason = _unusable(name, out) or (
                f"the reference for {name!r} is not finite (a problem definition bug)"
                if not np.isfinite(ref).all()
                else f"output {name!r}: the error overflowed float64"
            )
            return OutputCheck(float("inf"), reason)
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
