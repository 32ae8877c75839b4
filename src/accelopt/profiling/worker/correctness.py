"""Judging a kernel's outputs against the reference: pure functions on arrays.

When an output fails, ``describe_mismatch`` says what a person would look at: how many elements
are wrong, where (a pattern such as "all of row 17" or "the last 3 columns"), and the first
few expected and got values. An element is *wrong* when
``|got - expected| > tol * (|expected| + rms(expected))`` (``wrong_elements``): ``tol`` is the
problem's relative L2 tolerance, applied per element relative to the element and to the
reference's root mean square (its typical size, so elements near zero are not flagged for
rounding). An output whose every element were off by exactly ``tol * rms`` would just pass the
L2 test, so one that fails it has at least one element near or beyond that bound; NaN and Inf
are always wrong.

An output within the L2 tolerance still fails when an element is off by more than ELEMENT_FACTOR
times that bound: a handful of stale elements (a kernel that recomputed all but what changed, or
replayed a cached output) hide inside an L2 norm over millions. The factor sits in a wide gap:
every shipped baseline and expert, on the small and cpu workloads, stays under 0.85 of the
factor-1 bound (mamba's expert; most under 0.15), and a kernel whose errors were all at the L2
limit with that tail would reach about 14; an element left stale when its inputs changed is off
by 1 % to 100 % of the output's scale, hundreds to tens of thousands of times the bound."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

import numpy as np


@dataclass(frozen=True)
class OutputCheck:
    max_rel_err: float  # inf when the output is unusable
    error: str = ""  # empty when the outputs are within tolerance


P = ParamSpec("P")
R = TypeVar("R")
CHUNK = 1 << 16  # elements per step: the float64 scratch (512 KiB) stays in cache
ELEMENT_FACTOR = 25  # an element off by this many times the per-element bound fails (docstring)


def rel_l2_error(out: np.ndarray, ref: np.ndarray) -> float:
    """||out - ref||_2 / ||ref||_2 in float64 (the absolute norm when the reference is zero)."""
    diff_sq, scale_sq, _ = _squares(out, ref)
    diff, scale = np.sqrt(diff_sq), np.sqrt(scale_sq)
    return float(diff / scale) if scale > 0 else float(diff)


def _squares(out: np.ndarray, ref: np.ndarray) -> tuple[float, float, float]:
    """||out - ref||^2, ||ref||^2 and max |out - ref|, in float64 (NaN where a difference is)."""
    o, r = out.reshape(-1), ref.reshape(-1)
    diff_sq = scale_sq = largest = 0.0
    scratch = np.empty(min(CHUNK, o.size), dtype=np.float64)  # no allocation per step
    for start in range(0, o.size, CHUNK):
        rc = r[start : start + CHUNK]
        rc = rc if rc.dtype == np.float64 else rc.astype(np.float64)
        d = scratch[: rc.size]
        np.subtract(o[start : start + CHUNK], rc, out=d, dtype=np.float64)
        diff_sq += float(d @ d)
        scale_sq += float(rc @ rc)
        if d.size:
            largest = max(largest, float(np.abs(d).max()))
    return diff_sq, scale_sq, largest


def count_wrong(out: np.ndarray, ref: np.ndarray, tol: float, rms: float) -> int:
    """How many elements are off by more than ``tol * (|expected| + rms)`` (finite outputs: the
    count ``wrong_elements`` would give, without its mask)."""
    wrong = 0
    for _, o, r in _chunks(out, ref):
        wrong += int(np.count_nonzero(np.abs(o - r) > tol * (np.abs(r) + rms)))
    return wrong


def _unusable(name: str, out: np.ndarray) -> str:
    nan = int(np.isnan(out).sum())
    if nan == out.size:
        return f"output {name!r} was not written (still NaN after the call)"
    if nan:
        return f"output {name!r} has {nan} of {out.size} values NaN (partly written, or NaN)"
    inf = int(np.isinf(out).sum())
    return f"output {name!r} has {inf} infinite values" if inf else ""


def _not_finite(name: str, out: np.ndarray, ref: np.ndarray, tol: float) -> str:
    """Why the error is not finite, with the mismatch details when they say more than that."""
    reason = _unusable(name, out)
    if not reason:
        if not np.isfinite(ref).all():
            return f"the reference for {name!r} is not finite (a problem definition bug)"
        reason = f"output {name!r}: the error overflowed float64"
    if np.isnan(out).all():
        return reason
    return f"{reason}\n{describe_mismatch(name, out, ref, tol)}"


def check_outputs(
    names: Sequence[str], outputs: Sequence[np.ndarray], refs: Sequence[np.ndarray], tol: float
) -> OutputCheck:
    """NaN/Inf fail; otherwise the worst relative L2 error must be within ``tol``, and no element
    off by more than ELEMENT_FACTOR times its bound (the module's docstring). A failure's error
    names the output, then (``describe_mismatch``) which elements are wrong and how."""
    worst = 0.0
    for name, out, ref in zip(names, outputs, refs, strict=True):
        if out.shape != ref.shape:
            return OutputCheck(float("inf"), f"reference {name!r} has shape {ref.shape}")
        diff_sq, scale_sq, largest = _squares(out, ref)
        err = float(np.sqrt(diff_sq / scale_sq)) if scale_sq > 0 else float(np.sqrt(diff_sq))
        if not np.isfinite(err):  # NaN or Inf somewhere: say which
            return OutputCheck(float("inf"), _not_finite(name, out, ref, tol))
        worst = max(worst, err)
        if err > tol:
            head = f"output {name!r}: relative L2 error {err:.3g} > {tol:.1g}"
            return OutputCheck(worst, f"{head}\n{describe_mismatch(name, out, ref, tol)}")
        rms = float(np.sqrt(scale_sq / max(out.size, 1)))
        # no element is off by more than its bound if none is off by ELEMENT_FACTOR * tol * rms
        # (each element's bound is at least that): the second pass only where one may be
        if largest > ELEMENT_FACTOR * tol * rms:
            stray = _stray_elements(name, out, ref, tol, rms)
            if stray:
                return OutputCheck(worst, stray)
    return OutputCheck(worst)


def _stray_elements(name: str, out: np.ndarray, ref: np.ndarray, tol: float, rms: float) -> str:
    """Why an output within the L2 tolerance still fails (elements off by more than
    ELEMENT_FACTOR times their bound), or ''."""
    bound = ELEMENT_FACTOR * tol
    if not count_wrong(out, ref, bound, rms):
        return ""
    head = (
        f"output {name!r}: elements off by more than {ELEMENT_FACTOR} times the tolerance "
        f"({bound:.1g} * (|expected| + rms)), though the relative L2 error is within {tol:.1g}"
    )
    return f"{head}\n{describe_mismatch(name, out, ref, bound)}"


# -- describing a mismatch --------------------------------------------------------------------

MAX_SHOWN = 3  # wrong elements quoted with their expected and got values
MAX_LINE_CHARS = 300  # each line of a description; it has at most two


def _quiet(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` without numpy's warnings about NaN and Inf (expected in wrong outputs)."""

    @functools.wraps(fn)
    def quiet(*args: P.args, **kwargs: P.kwargs) -> R:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return fn(*args, **kwargs)

    return quiet


def _chunks(out: np.ndarray, ref: np.ndarray) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """Flat float64 pieces of ``out`` and ``ref``: the scratch stays small for any output."""
    o, r = out.reshape(-1), ref.reshape(-1)
    for start in range(0, o.size, CHUNK):
        at = slice(start, start + CHUNK)
        yield at, np.asarray(o[at], np.float64), np.asarray(r[at], np.float64)


def _rms(ref: np.ndarray) -> float:
    """The root mean square of the reference's finite values (0 when there are none)."""
    total, count = 0.0, 0
    for _, r, _ in _chunks(ref, ref):
        square = float(r @ r)
        if not np.isfinite(square):  # only the finite values count
            r = r[np.isfinite(r)]
            square = float(r @ r)
        total, count = total + square, count + r.size
    return float(np.sqrt(total / count)) if count else 0.0


@_quiet
def wrong_elements(out: np.ndarray, ref: np.ndarray, tol: float) -> np.ndarray:
    """Which elements are wrong (booleans in ``out``'s shape): NaN or Inf, or off by more than
    ``tol * (|expected| + rms(expected))`` (the module's docstring says why)."""
    rms, mask = _rms(ref), np.empty(out.size, dtype=bool)
    for at, o, r in _chunks(out, ref):
        mask[at] = ~(np.abs(o - r) <= tol * (np.abs(r) + rms))  # NaN compares False: wrong
    return mask.reshape(out.shape)


def coordinates(name: str, shape: tuple[int, ...], flat: int) -> str:
    """The element at C-order position ``flat`` as ``name[i, j]``."""
    if not shape:
        return name
    return f"{name}[{', '.join(str(int(i)) for i in np.unravel_index(flat, shape))}]"


def _nouns(ndim: int) -> list[str]:
    """What an index along each axis is called: the last two axes are rows and columns."""
    return ["element"] if ndim == 1 else ["slice"] * (ndim - 2) + ["row", "column"]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _ordinal(n: int) -> str:
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _span(idx: np.ndarray, n: int, noun: str, extra: str = "") -> str:
    """Indices ``idx`` (sorted) out of ``n`` along an axis, in words; ``extra`` joins the note."""
    k, a, b = len(idx), int(idx[0]), int(idx[-1])
    step = int(idx[1] - idx[0]) if k > 1 else 1
    if k == 1:
        text, notes = f"{noun} {a}", ["the last"] if a == n - 1 and n > 1 else []
    elif b - a + 1 == k and b == n - 1:
        text, notes = f"the last {k} {noun}s", [f"{a}-{b}"]
    elif b - a + 1 == k:
        text, notes = (f"the first {k} {noun}s", [f"0-{b}"]) if a == 0 else (f"{noun}s {a}-{b}", [])
    elif _regular(idx):
        text, notes = f"every {_ordinal(step)} {noun} from {a} to {b}", [f"{k} {noun}s"]
    else:
        text, notes = f"{k} {noun}s", [", ".join(str(int(i)) for i in idx[:4]) + ", ..."]
    notes += [extra] if extra else []
    return f"{text} ({'; '.join(notes)})" if notes else text


def _regular(idx: np.ndarray) -> bool:
    """Whether sorted indices are evenly spaced (contiguous, or every n-th)."""
    return idx.size < 3 or bool((np.diff(idx) == idx[1] - idx[0]).all())


def _slice(name: str, ndim: int, axis: int, idx: np.ndarray) -> str:
    """``name[:, a:b]`` for contiguous indices along ``axis``, else ''."""
    a, b = int(idx[0]), int(idx[-1])
    if b - a + 1 != len(idx):
        return ""
    parts = [":"] * ndim
    parts[axis] = str(a) if a == b else f"{a}:{b + 1}"
    return f"{name}[{', '.join(parts)}]"


def mismatch_pattern(name: str, mask: np.ndarray) -> str:
    """Where the wrong elements (``mask``) lie: "every element", "all of row 17 (out[17, :])",
    "only in the last 3 columns (45-47)", or '' (none, one, or no pattern found)."""
    count = int(mask.sum())
    if mask.ndim == 0 or count <= 1:
        return ""
    if count == mask.size:
        return "every element"
    if count >= 0.9 * mask.size:
        return f"all but {_count(mask.size - count, 'element')}"
    nouns = _nouns(mask.ndim)
    axes = sorted(range(mask.ndim), key=lambda a: a < mask.ndim - 2)  # rows, columns, slices
    for axis in axes:
        others = tuple(a for a in range(mask.ndim) if a != axis)
        full = np.flatnonzero(mask.all(axis=others))
        if mask.ndim == 1 and not _regular(full):
            return ""  # elements with no pattern: the count says it
        if full.size and full.size * (mask.size // mask.shape[axis]) == count:
            where = _slice(name, mask.ndim, axis, full)
            return f"all of {_span(full, mask.shape[axis], nouns[axis], where)}"
    parts = []
    for axis in axes:
        hit = mask.any(axis=tuple(a for a in range(mask.ndim) if a != axis))
        if not hit.all():
            parts.append(_span(np.flatnonzero(hit), mask.shape[axis], nouns[axis]))
    return f"only in {', '.join(parts)}" if parts else ""


@_quiet
def _value_facts(out: np.ndarray, ref: np.ndarray, mask: np.ndarray) -> list[str]:
    """What the wrong elements' values have in common: NaN, Inf, all zero, or one scale (nothing
    for a single element: its quoted value says it)."""
    flat_mask = mask.reshape(-1)
    if flat_mask.sum() < 2:
        return []
    nan = inf = nonzero = 0
    lo, hi = np.inf, -np.inf  # the range of got / expected where expected is not zero
    for at, o, r in _chunks(out, ref):
        got, want = o[flat_mask[at]], r[flat_mask[at]]
        nan, inf = nan + int(np.isnan(got).sum()), inf + int(np.isinf(got).sum())
        nonzero += int(np.count_nonzero(got))
        ratio = got[want != 0] / want[want != 0]
        if ratio.size:
            lo, hi = min(lo, float(ratio.min())), max(hi, float(ratio.max()))
    if nan or inf:
        return [f"NaN in {_count(nan, 'element')}"] * bool(nan) + [
            f"Inf in {_count(inf, 'element')}"
        ] * bool(inf)
    if not nonzero:
        return ["got 0 in all of them"]
    if lo * hi > 0 and abs(hi - lo) <= 1e-3 * min(abs(lo), abs(hi)):
        return [f"each is {(lo + hi) / 2:.4g} times the expected value"]
    return []


def _first(mask: np.ndarray, k: int) -> np.ndarray:
    """The flat positions of the first ``k`` True elements, read chunk by chunk."""
    flat, found = mask.reshape(-1), []
    for start in range(0, flat.size, CHUNK):
        found.extend(int(i) + start for i in np.flatnonzero(flat[start : start + CHUNK])[:k])
        if len(found) >= k:
            break
    return np.array(found[:k], dtype=np.int64)


@_quiet
def _largest(out: np.ndarray, ref: np.ndarray, k: int) -> np.ndarray:
    """The flat positions of the ``k`` largest |out - ref|, in order of position."""
    best: list[tuple[float, int]] = []
    for at, o, r in _chunks(out, ref):
        diff = np.abs(o - r)
        top = np.argsort(diff)[-k:]
        best = sorted([*best, *((float(diff[i]), int(i) + at.start) for i in top)])[-k:]
    return np.array(sorted(i for _, i in best), dtype=np.int64)


def _quote(name: str, out: np.ndarray, ref: np.ndarray, flat: np.ndarray) -> str:
    o, r = out.reshape(-1), ref.reshape(-1)
    return "; ".join(
        f"{coordinates(name, out.shape, int(i))}: expected {float(r[i]):.6g}, got {float(o[i]):.6g}"
        for i in flat
    )


def describe_mismatch(name: str, out: np.ndarray, ref: np.ndarray, tol: float) -> str:
    """Two lines: how many elements are wrong (``wrong_elements``) and where or how, then the
    first few with their expected and got values (the largest errors when none is wrong)."""
    mask = wrong_elements(out, ref, tol)
    count = int(mask.sum())
    if count == 0:
        head = f"no element is off by more than {tol:.1g} * (|expected| + rms): the error is spread"
        lines = [f"{head} thinly over many elements", "largest: "]
        shown = _largest(out, ref, MAX_SHOWN)
    else:
        where = [mismatch_pattern(name, mask), *_value_facts(out, ref, mask)]
        summary = "; ".join(w for w in where if w)
        lines = [f"{count} of {mask.size} elements wrong" + (f": {summary}" if summary else "")]
        lines.append("first wrong: ")
        shown = _first(mask, MAX_SHOWN)
    lines[1] += _quote(name, out, ref, shown)
    return "\n".join(_clip(line) for line in lines)


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 3] + "..."


def modified_input(
    names: Sequence[str], after: Sequence[np.ndarray], before: Sequence[np.ndarray]
) -> str:
    """The name of the first input whose bits changed during the call, or ''."""
    for name, a, b in zip(names, after, before, strict=True):
        if not same_bits(a, b):
            return name
    return ""


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two float32 arrays hold the same bits, compared a chunk at a time (a whole-array
    comparison's boolean temporary is memory touched for nothing: ``hostmemory.py``)."""
    if a.shape != b.shape:
        return False
    x, y = a.reshape(-1).view(np.uint32), b.reshape(-1).view(np.uint32)
    return all(
        np.array_equal(x[at : at + CHUNK], y[at : at + CHUNK]) for at in range(0, x.size, CHUNK)
    )
