"""The generalization table of a run on several workloads: baseline vs best on each, against the
run's ceilings (a peak per workload, every % its peak over the row's ms)."""

from __future__ import annotations

from collections.abc import Mapping

from rich.table import Table

from accelopt.formatting import milliseconds, percent, speedup_x
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.parent.scoring import workload_roofline
from accelopt.profiling.stats import geomean
from accelopt.search.workloads import Generalization


def workload_peaks(
    g: Generalization, problem: Problem, hardware: HardwareSpec | None
) -> dict[str, float]:
    """Each workload's roofline time at ``hardware``'s cached ceilings ({} without them)."""
    if hardware is None:
        return {}
    return {r.workload: workload_roofline(problem, r.workload, hardware).peak_s for r in g.rows}


def generalization_table(g: Generalization, peaks: Mapping[str, float] | None = None) -> Table:
    """Baseline vs best on each workload of a run, tuned-on first, then the geometric means of
    the tuned and the held-out workloads. ``peaks``: each workload's roofline time at the run's
    cached ceilings; with them, a ``peak ms`` column and every % = peak ms / ms (one ceiling),
    else the search's own figures."""
    table = Table(title="generalization: baseline vs best per workload", title_justify="left")
    roofed = bool(peaks)
    peak_column = ["peak ms"] if roofed else []
    columns = ["workload", "role", "sizes", *peak_column, "baseline ms", "baseline %", "best ms"]
    for col in [*columns, "best %", "speedup"]:
        table.add_column(col, justify="left" if col in {"workload", "role", "sizes"} else "right")
    means: dict[str, list[tuple[float | None, float | None]]] = {}
    for r in g.rows:
        peak = (peaks or {}).get(r.workload)
        base_pct = _over(peak, r.baseline_latency_s) if roofed else r.baseline_pct
        best_pct = _over(peak, r.best_latency_s) if roofed else r.best_pct
        means.setdefault(r.role, []).append((base_pct, best_pct))
        sizes = ", ".join(f"{k}={v}" for k, v in r.sizes.items())
        best_ms = milliseconds(r.best_latency_s)
        if r.best_latency_s is None:
            best_ms = r.best_status or "not measured"
        table.add_row(
            r.workload,
            r.role,
            sizes,
            *([milliseconds(peak)] if roofed else []),
            milliseconds(r.baseline_latency_s),
            percent(base_pct),
            best_ms,
            percent(best_pct),
            speedup_x(r.speedup),
        )
    table.add_section()
    for group in g.groups:
        pairs = means.get(group.role, [])
        base = geomean([b for b, _ in pairs], skip_missing=True) if roofed else group.baseline_pct
        best = geomean([t for _, t in pairs], skip_missing=True) if roofed else group.best_pct
        table.add_row(
            f"geomean ({group.workloads})",
            group.role,
            "",
            *([""] if roofed else []),
            "",
            percent(base),
            "",
            percent(best),
            speedup_x(group.speedup),
            style="bold",
        )
    return table


def _over(peak: float | None, latency: float | None) -> float | None:
    return peak / latency if peak and latency else None
