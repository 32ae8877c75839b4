"""The reports' charts: matplotlib (Agg) figures saved as SVG text, ready to inline in a page.

Each function takes plain data and returns one ``<svg>`` element as a string. matplotlib is
imported on the first chart (about 0.3 s: the CLI does not pay it for every command). Figures are
built with ``matplotlib.figure.Figure`` rather than pyplot, so no global figure list grows, and
each is cleared after saving. Text stays text (``svg.fonttype = none``): the page uses the viewer's
sans-serif font, nothing is fetched. Element ids are prefixed per chart so that several charts
can share one page.
"""

from __future__ import annotations

import html
import io
import itertools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelopt.backends import registry

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STATUS_COLORS = {
    "PASSED": "#2e7d32",
    "SUSPICIOUS": "#ad1457",
    "INCORRECT": "#ef6c00",
    "COMPILE_ERROR": "#c62828",
    "REJECTED": "#6d4c41",
    "CRASH": "#212121",
    "TIMEOUT": "#757575",
}
# the reference kinds take these in the registry's order (numpy, torch, inductor, max-autotune)
_REFERENCE_COLORS = ("#ef6c00", "#6a1b9a", "#c62828", "#ad1457", "#00838f", "#558b2f")
KIND_COLORS = {
    "baseline": "#1565c0",
    "expert": "#2e7d32",
    "best": "#2e7d32",
    "candidate": "#bdbdbd",
    # the built-in ones: another distribution's reference kind is drawn in _OTHER
    **dict(
        zip((r.name for r in registry.BUILT_IN if r.reference), _REFERENCE_COLORS, strict=False)
    ),
}
BEST_LINE = "committed best (noise-aware)"
_OTHER = "#7b1fa2"
_RC = {
    "svg.fonttype": "none",  # <text>, not glyph paths: smaller, and still no font download
    "svg.hashsalt": "accelopt",  # stable marker ids, so the same data gives the same page
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_ids = itertools.count(1)


@dataclass(frozen=True)
class CandidatePoint:
    """One evaluated kernel of a run: its iteration, % of peak (a fraction, None when it did
    not pass timing), status, and the 95 % interval of its % of peak (None: none known)."""

    iteration: int
    pct: float | None
    status: str
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class RooflinePoint:
    """One kernel on the roofline chart: FLOPs per byte and the FLOP/s it achieved."""

    label: str
    kind: str
    intensity: float
    flops_per_s: float


@dataclass(frozen=True)
class Curve:
    """One line of a comparison chart: (x, fraction of peak) points in order."""

    label: str
    points: tuple[tuple[float, float], ...]


# -- SVG text ---------------------------------------------------------------------------------


@contextmanager
def _style() -> Iterator[None]:
    """matplotlib on the Agg backend (imported here, on first use) with the reports' style."""
    import matplotlib

    matplotlib.use("Agg")
    with matplotlib.rc_context(_RC):
        yield


def _svg(fig: Figure, label: str) -> str:
    """The figure as inline SVG; call inside ``_style()`` (the SVG settings are read here)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    fig.clf()
    return inline_svg(buf.getvalue(), f"p{next(_ids)}", label)


def inline_svg(text: str, prefix: str, label: str) -> str:
    """A standalone SVG document made fit for an HTML page: the XML prolog, the metadata and the
    namespace declarations dropped (HTML knows them), ids prefixed, size set by the page's CSS."""
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
    text = text.replace("*{stroke-linejoin", "svg.plot *{stroke-linejoin")
    root_end = text.index(">")
    root = re.sub(r'\s(width|height)="[^"]*"', "", text[:root_end])
    attrs = f' class="plot" role="img" aria-label="{html.escape(label)}"'
    text = root + attrs + text[root_end:]
    ids = set(re.findall(r'\sid="([^"]+)"', text))
    text = re.sub(r'\sid="([^"]+)"', lambda m: f' id="{prefix}-{m.group(1)}"', text)
    return re.sub(
        r"#([\w.-]+)",
        lambda m: f"#{prefix}-{m.group(1)}" if m.group(1) in ids else m.group(0),
        text,
    )


def _figure(width: float = 7.0, height: float = 3.6) -> Figure:
    """A figure with one axes; call inside ``_style()``."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    fig.add_subplot()
    return fig


def _empty(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#757575")


# -- run report -------------------------------------------------------------------------------


def _spread(points: Sequence[CandidatePoint]) -> list[float]:
    """x positions: points of one iteration spread evenly across ±0.3 so they do not overlap."""
    per_iteration: dict[int, list[int]] = {}
    for i, p in enumerate(points):
        per_iteration.setdefault(p.iteration, []).append(i)
    xs = [0.0] * len(points)
    for iteration, members in per_iteration.items():
        n = len(members)
        for j, i in enumerate(members):
            xs[i] = iteration + (0.0 if n == 1 else -0.3 + 0.6 * j / (n - 1))
    return xs


def _error_bars(ax, xs: Sequence[float], points: Sequence[CandidatePoint], status: str) -> None:
    """Each point's 95 % interval of its % of peak, as a vertical bar in its colour."""
    bars = [
        (x, p)
        for x, p in zip(xs, points, strict=True)
        if p.pct is not None and p.low is not None and p.high is not None
    ]
    if not bars:
        return
    ys = [100 * p.pct for _, p in bars if p.pct is not None]
    below = [100 * (p.pct - p.low) for _, p in bars if p.pct is not None and p.low is not None]
    above = [100 * (p.high - p.pct) for _, p in bars if p.pct is not None and p.high is not None]
    ax.errorbar(
        [x for x, _ in bars],
        ys,
        yerr=[below, [min(a, 1e3) for a in above]],
        fmt="none",
        ecolor=STATUS_COLORS.get(status, _OTHER),
        elinewidth=1,
        capsize=2,
        alpha=0.5,
        zorder=2,
    )


def progress_plot(
    candidates: Sequence[CandidatePoint], best: Sequence[tuple[int, float | None]]
) -> str:
    """The committed best % of peak after each iteration (a line: a kernel joins it only once
    the search found it faster beyond the noise) and every candidate as a point coloured by
    status, its 95 % interval as a bar; kernels without a % of peak (failed) sit at 0 as
    crosses."""
    with _style():
        fig = _figure()
        ax = fig.axes[0]
        xs = _spread(candidates)
        for status in sorted({c.status for c in candidates}):
            chosen = [(x, c) for x, c in zip(xs, candidates, strict=True) if c.status == status]
            ys = [100 * c.pct if c.pct is not None else 0.0 for _, c in chosen]
            failed = all(c.pct is None for _, c in chosen)
            ax.scatter(
                [x for x, _ in chosen],
                ys,
                s=22,
                marker="x" if failed else "o",
                color=STATUS_COLORS.get(status, _OTHER),
                label=f"{status} ({len(chosen)})",
                alpha=0.85,
                zorder=3,
                clip_on=False,
            )
            _error_bars(ax, [x for x, _ in chosen], [c for _, c in chosen], status)
        line = [(t, 100 * p) for t, p in best if p is not None]
        if line:
            ax.plot(
                [t for t, _ in line],
                [p for _, p in line],
                "-D",
                color="#1565c0",
                markersize=4,
                linewidth=2,
                label=BEST_LINE,
                zorder=2,
            )
        if not candidates and not line:
            _empty(ax, "no evaluated kernels")
        ax.set_xlabel("iteration")
        ax.set_ylabel("% of peak")
        ax.set_ylim(bottom=0)
        ax.xaxis.get_major_locator().set_params(integer=True)
        if candidates or line:
            ax.legend(loc="upper left", fontsize=8, frameon=False, bbox_to_anchor=(1.0, 1.0))
        return _svg(fig, "best % of peak per iteration, every candidate by status")


# -- suite report -----------------------------------------------------------------------------


def kind_bars(problems: Sequence[str], series: Mapping[str, Sequence[float | None]]) -> str:
    """Grouped bars: % of peak per problem, one bar per kernel kind (missing values: no bar)."""
    with _style():
        fig = _figure(min(12.0, max(7.0, 2.0 + 0.25 * len(problems) * max(1, len(series)))), 4.0)
        ax = fig.axes[0]
        width = 0.8 / max(1, len(series))
        for k, (kind, values) in enumerate(series.items()):
            xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(problems))]
            ys = [100 * v if v is not None else 0.0 for v in values]
            ax.bar(xs, ys, width=width, label=kind, color=KIND_COLORS.get(kind, _OTHER))
        ax.set_xticks(range(len(problems)), list(problems), rotation=30, ha="right")
        ax.set_ylabel("% of peak")
        ax.grid(axis="x", visible=False)
        if not any(v is not None for values in series.values() for v in values):
            _empty(ax, "no timed kernels (--check-only?)")
        elif series:
            ax.legend(fontsize=8, frameon=False)
        return _svg(fig, "% of peak per problem and kernel kind")


def roofline_chart(
    points: Sequence[RooflinePoint], matmul_rate: float, vector_rate: float, bandwidth: float
) -> str:
    """Log-log roofline: arithmetic intensity (FLOP/byte) against achieved FLOP/s, under the
    measured ceilings min(rate, bandwidth × intensity) for the matmul and the vector rate."""
    with _style():
        fig = _figure(7.0, 4.4)
        ax = fig.axes[0]
        ax.set_xscale("log")
        ax.set_yscale("log")
        lo, hi = _intensity_range(points, matmul_rate, vector_rate, bandwidth)
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        for name, rate, style in (("matmul", matmul_rate, "-"), ("vector", vector_rate, "--")):
            roof = [min(rate, bandwidth * x) for x in grid]
            ax.plot(
                grid,
                roof,
                style,
                color="#424242",
                linewidth=1.2,
                label=f"{name} roof {rate / 1e9:.0f} GFLOP/s",
            )
        ax.plot([], [], " ", label=f"bandwidth {bandwidth / 1e9:.0f} GB/s")
        for kind in dict.fromkeys(p.kind for p in points):
            mine = [p for p in points if p.kind == kind]
            ax.scatter(
                [p.intensity for p in mine],
                [p.flops_per_s for p in mine],
                s=26,
                color=KIND_COLORS.get(kind, _OTHER),
                label=kind,
                zorder=3,
            )
        for p in _labelled([p for p in points if p.label]):
            ax.annotate(
                p.label,
                (p.intensity, p.flops_per_s),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
                color="#424242",
            )
        if not points:
            _empty(ax, "no timed kernels (--check-only?)")
        ax.set_xlim(lo, hi)
        ax.set_xlabel("arithmetic intensity (FLOP / byte)")
        ax.set_ylabel("achieved GFLOP/s")
        ax.yaxis.set_major_formatter(_giga)
        ax.yaxis.set_minor_formatter(_giga_minor)
        ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig, "roofline: arithmetic intensity against achieved FLOP/s")


def _giga(value: float, _position: object = None) -> str:
    """A tick of a FLOP/s axis in GFLOP/s (``250``, ``1,000``, ``0.5``)."""
    return f"{value / 1e9:,.4g}"


def _giga_minor(value: float, _position: object = None) -> str:
    """Minor ticks of a log axis: labelled at 2 and 5 of a decade only, as numbers."""
    mantissa = value / 10 ** math.floor(math.log10(value)) if value > 0 else 0.0
    return _giga(value) if round(mantissa) in (2, 5) else ""


def _labelled(points: Sequence[RooflinePoint]) -> list[RooflinePoint]:
    """One label per problem, on its fastest point (the kinds share the intensity)."""
    top: dict[str, RooflinePoint] = {}
    for p in points:
        if p.label not in top or p.flops_per_s > top[p.label].flops_per_s:
            top[p.label] = p
    return list(top.values())


def _intensity_range(
    points: Sequence[RooflinePoint], matmul_rate: float, vector_rate: float, bandwidth: float
) -> tuple[float, float]:
    ridge = max(matmul_rate, vector_rate) / bandwidth
    xs = [p.intensity for p in points] + [min(matmul_rate, vector_rate) / bandwidth, ridge]
    return min(xs) / 4, max(xs) * 4


# -- comparison -------------------------------------------------------------------------------


def compare_plot(curves: Sequence[Curve], xlabel: str, integer_x: bool = False) -> str:
    """Best % of peak against ``xlabel`` (e.g. $ spent, iteration), one line per run."""
    with _style():
        fig = _figure(6.0, 3.6)
        ax = fig.axes[0]
        for curve in curves:
            if curve.points:
                xs, ys = zip(*curve.points, strict=True)
                ax.plot(xs, [100 * y for y in ys], "o-", markersize=3, label=curve.label)
        if not any(c.points for c in curves):
            _empty(ax, "no iterations recorded")
        else:
            ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(0.0, -0.16))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("best % of peak")
        ax.set_ylim(bottom=0)
        if any(x > 0 for c in curves for x, _ in c.points):
            ax.set_xlim(left=0)  # $ and iterations start at 0: no negative half of an axis
        if integer_x:
            ax.xaxis.get_major_locator().set_params(integer=True)
        return _svg(fig, f"best % of peak against {xlabel}")
