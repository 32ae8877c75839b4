"""The sensitivity plot of a tuned kernel: one panel per tunable, each timed variant's latency
(with its 95 % interval as an error bar) against its value of that tunable, the fastest at each
value joined by a line. The other tunables vary between the points at one value. Inline SVG, as
``plots`` makes its charts."""

from __future__ import annotations

import math
from collections.abc import Sequence

from accelopt.reports.plots import _empty, _figure, _style, _svg
from accelopt.reports.tuning_view import Sensitivity, SensitivityPoint

_VARIANT = "#757575"
_WRITTEN = "#1565c0"
_KEPT = "#2e7d32"
_COLUMNS = 3  # panels per row, at most


def _scale(panels: Sequence[Sensitivity]) -> tuple[float, str]:
    """Seconds to the unit the axis uses: µs where every latency is below 0.1 ms."""
    slowest = max((p.ci_high_s or p.latency_s for s in panels for p in s.points), default=1.0)
    return (1e6, "µs") if slowest < 1e-4 else (1e3, "ms")


def _xs(panel: Sensitivity) -> list[float]:
    """x of each point: its value's position, points of one value spread across ±0.25."""
    position = {v: i for i, v in enumerate(panel.values)}
    counts: dict[str, int] = {}
    for p in panel.points:
        counts[p.value] = counts.get(p.value, 0) + 1
    seen: dict[str, int] = {}
    xs = []
    for p in panel.points:
        n, j = counts[p.value], seen.get(p.value, 0)
        seen[p.value] = j + 1
        xs.append(position[p.value] + (0.0 if n == 1 else -0.25 + 0.5 * j / (n - 1)))
    return xs


def _kind(p: SensitivityPoint) -> tuple[str, str, str, int]:
    """label, colour, marker and size of a point."""
    if p.kept:
        return "kept (the run's best)", _KEPT, "*", 11
    if p.as_written:
        return "the kernel as written", _WRITTEN, "D", 6
    return "variant", _VARIANT, "o", 5


def _panel(ax, panel: Sensitivity, scale: float, unit: str) -> None:
    for x, p in zip(_xs(panel), panel.points, strict=True):
        label, color, marker, size = _kind(p)
        y = p.latency_s * scale
        low = (p.latency_s - p.ci_low_s) * scale if p.ci_low_s else 0.0
        high = (p.ci_high_s - p.latency_s) * scale if p.ci_high_s else 0.0
        ax.errorbar(
            [x],
            [y],
            yerr=[[max(low, 0.0)], [max(high, 0.0)]],
            fmt=marker,
            color=color,
            markersize=size,
            ecolor=color,
            elinewidth=1,
            capsize=2,
            alpha=0.9,
            label=label,
            zorder=3 if label != "variant" else 2,
        )
    fastest = [
        min((p.latency_s for p in panel.points if p.value == v), default=math.nan)
        for v in panel.values
    ]
    ax.plot(
        range(len(panel.values)),
        [f * scale for f in fastest],
        "--",
        color="#9e9e9e",
        linewidth=1,
        label="fastest at this value",
        zorder=1,
    )
    ax.set_xticks(range(len(panel.values)), list(panel.values))
    ax.set_xlim(-0.6, len(panel.values) - 0.4)
    ax.set_xlabel(panel.tunable)
    ax.set_ylabel(f"latency ({unit})")
    ax.set_ylim(bottom=0)
    ax.grid(axis="x", visible=False)


def sensitivity_plot(panels: Sequence[Sensitivity]) -> str:
    """Latency against each tunable's values (see the module's docstring)."""
    with _style():
        columns = max(1, min(_COLUMNS, len(panels)))
        rows = max(1, math.ceil(len(panels) / columns))
        fig = _figure(min(10.0, 3.4 * columns), 2.9 * rows)
        fig.clf()
        axes = fig.subplots(rows, columns, squeeze=False)
        if not panels:
            _empty(axes[0][0], "no tunable took two values among the timed variants")
            return _svg(fig, "latency against each tunable's values")
        scale, unit = _scale(panels)
        for i, ax in enumerate(ax for row in axes for ax in row):
            if i < len(panels):
                _panel(ax, panels[i], scale, unit)
            else:
                ax.set_visible(False)
        unique: dict[str, object] = {}
        for ax in (ax for row in axes for ax in row):
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                unique.setdefault(label, handle)
        fig.legend(
            list(unique.values()),
            list(unique),
            loc="upper center",
            ncol=4,
            fontsize=8,
            frameon=False,
            bbox_to_anchor=(0.5, 1.08),
        )
        fig.tight_layout()
        return _svg(fig, "latency against each tunable's values, 95 % intervals as error bars")
