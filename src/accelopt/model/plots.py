"""The model report's chart: where the time went, before and after, drawn with the reports' own
matplotlib style and SVG helpers (``reports.plots``)."""

from __future__ import annotations

from collections.abc import Sequence

from accelopt.model.records import Share
from accelopt.reports.plots import _empty, _figure, _style, _svg

OTHER = "other"
_LONGEST = 48  # characters of a label the legend shows
_OTHER_COLOR = "#bdbdbd"
# matplotlib's tab10 without its grey (the "other" segment's colour)
_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
)


def _shown(label: str) -> str:
    """A label as matplotlib must be given it to show it as written: ``$`` not read as maths,
    a leading ``_`` (which hides a legend entry) kept visible, a long one cut."""
    text = label if len(label) <= _LONGEST else label[: _LONGEST - 1] + "…"
    text = text.replace("$", r"\$")
    return "\u200b" + text if text.startswith("_") else text


def _totals(shares: Sequence[Share]) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in shares:
        out[s.label] = out.get(s.label, 0.0) + s.ms
    return out


def stacked_segments(
    bars: Sequence[Sequence[Share]], top: int = 8
) -> tuple[list[str], list[list[float]]]:
    """The segments of stacked bars that share their labels: the ``top`` labels by their
    largest time in any bar (in that order), then ``other`` (the rest, summed; only where
    there is a rest). Returns the labels and, per bar, its ms per label."""
    totals = [_totals(b) for b in bars]
    labels = list(dict.fromkeys(label for t in totals for label in t))
    ranked = sorted(labels, key=lambda label: -max(t.get(label, 0.0) for t in totals))
    kept = ranked[:top]
    rest = [sum(v for label, v in t.items() if label not in kept) for t in totals]
    values = [[t.get(label, 0.0) for label in kept] for t in totals]
    if len(ranked) > top:
        kept.append(OTHER)
        for row, extra in zip(values, rest, strict=True):
            row.append(extra)
    return kept, values


def time_bars(before: Sequence[Share], after: Sequence[Share], top: int = 8) -> str:
    """Two horizontal stacked bars, eager (``before``) and accelopt (``after``): each model
    call's ms split by subgraph and op, the ``top`` labels coloured alike in both, the rest as
    ``other``."""
    names = ["eager", "accelopt"]
    labels, values = stacked_segments([before, after], top)
    with _style():
        fig = _figure(7.0, 2.2 + 0.12 * len(labels))
        ax = fig.axes[0]
        left = [0.0] * len(names)
        for i, label in enumerate(labels):
            widths = [row[i] for row in values]
            color = _OTHER_COLOR if label == OTHER else _PALETTE[i % len(_PALETTE)]
            ax.barh(
                names,
                widths,
                left=left,
                color=color,
                label=_shown(label),
                height=0.55,
                edgecolor="white",
                linewidth=0.6,
            )
            left = [a + w for a, w in zip(left, widths, strict=True)]
        for name, total in zip(names, left, strict=True):
            if total > 0:
                ax.annotate(
                    f"{total:.4g} ms",
                    (total, name),
                    xytext=(4, 0),
                    fontsize=8,
                    textcoords="offset points",
                    va="center",
                )
        if not labels:
            _empty(ax, "no time recorded")
        else:
            ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.set_yticks(range(len(names)), names)
        ax.set_ylim(len(names) - 0.5, -0.5)  # eager on top
        ax.set_xlabel("ms per model call")
        ax.set_xlim(0, 1.15 * max(left) if max(left) > 0 else 1.0)  # room for the totals
        ax.grid(axis="y", visible=False)
        return _svg(fig, "where the time went, eager and with accelopt's kernels")
