"""``optimize``'s tables of a run that ended and of a suite of runs, against one ceiling each
(``one_ceiling``): every % of peak is the table's peak over the row's ms, beside what the kernel
achieved; the calibrated figures of a run (its own peak column) in the run's table."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from accelopt.cli.one_ceiling import (
    CALIBRATED_COLUMNS,
    RunCeiling,
    calibrated_cells,
    ceiling_lines,
    titled,
)
from accelopt.cli.output import versus_reference
from accelopt.formatting import milliseconds, percent, speedup_x, usd_plain
from accelopt.hardware.spec import HardwareSpec
from accelopt.profiling.stats import geomean
from accelopt.search.references import over_reference
from accelopt.search.summary import RunSummary

SUITE_CALIBRATED = "calibrated % of peak: in each run's table above"


def result_table(
    summary: RunSummary,
    ceiling: RunCeiling,
    hardware: HardwareSpec | None = None,
    speedup: str | None = None,
    note: str = "",
) -> Table:
    """The baseline, the best kernel and the best reference of a run: ms, the run's peak, % of
    it and the rate achieved; where a kernel was calibrated, its calibrated peak and %; the
    speedup over the baseline (``speedup``: the best row's cell, with its interval, say) and the
    best reference. ``hardware``: the ceilings the run is scored against (its title says when
    they are provisional); ``note``: the caption's first line (where the figures come from)."""
    tuned = summary.workloads or (summary.workload,)
    shown = summary.workload if len(tuned) == 1 else f"geomean of {len(tuned)} workloads"
    title = f"run {summary.run}: {summary.problem} / {shown} ({summary.status})"
    table = Table(title=titled(title, hardware), title_justify="left", caption_justify="left")
    calibrated = bool(ceiling.calibrated)
    columns = ["kernel", "ms", "peak ms", "% of peak", "achieved"]
    columns += ["calibrated peak ms", "calibrated %"] if calibrated else []
    for col in (*columns, "speedup", "vs best reference"):
        table.add_column(col, justify="left" if col == "kernel" else "right")
    ref, roof = summary.reference, ceiling.roof
    b, t = summary.baseline, summary.best
    rows = [("baseline", b.latency_s, b.hash, "1.00x", speedup_x(over_reference(ref, b.latency_s))),
            ("best", t.latency_s, t.hash, speedup or speedup_x(summary.speedup),
             speedup_x(summary.speedup_over_reference))]  # fmt: skip
    if ref is not None:
        over_baseline = b.latency_s / ref.latency_s if b.latency_s else None
        rows.append((f"best reference: {ref.kind}", ref.latency_s, "", speedup_x(over_baseline),
                     "1.00x"))  # fmt: skip
    for name, latency, kernel, speedup, versus in rows:
        cells = calibrated_cells(ceiling.calibrated.get(kernel), latency) if calibrated else []
        table.add_row(escape(name), milliseconds(latency), milliseconds(roof.peak_s),
                      *roof.cells(latency), *cells, speedup, versus)  # fmt: skip
    lines = ceiling_lines(hardware, CALIBRATED_COLUMNS if calibrated else "")
    table.caption = escape("\n".join(([note] if note else []) + lines))
    return table


def suite_results_table(
    runs: Sequence[tuple[RunSummary, RunCeiling]], hardware: HardwareSpec | None = None
) -> Table:
    """A row per run of a suite: the run's peak, the baseline's and the best kernel's ms and % of
    it, what the best achieved, the speedups, what it cost; geometric means and totals."""
    table = Table(title=titled("suite results", hardware), title_justify="left",
                  caption_justify="left")  # fmt: skip
    for col in ("problem", "status", "peak ms", "baseline ms", "baseline %", "best ms", "best %",
                "best achieved", "speedup", "vs best ref", "$", "tokens"):  # fmt: skip
        table.add_column(col, justify="left" if col in {"problem", "status"} else "right")
    total_usd, total_tokens = 0.0, 0
    for s, ceiling in runs:
        usd = sum(u.cost_usd for u in s.usage.values())
        tokens = sum(u.tokens_in + u.tokens_out for u in s.usage.values())
        total_usd, total_tokens = total_usd + usd, total_tokens + tokens
        roof = ceiling.roof
        table.add_row(
            s.problem, s.status, milliseconds(roof.peak_s), milliseconds(s.baseline.latency_s),
            percent(roof.pct(s.baseline.latency_s)), milliseconds(s.best.latency_s),
            *roof.cells(s.best.latency_s), speedup_x(s.speedup),
            versus_reference(s.reference and s.reference.kind, s.speedup_over_reference),
            usd_plain(usd), str(tokens),
        )  # fmt: skip
    table.add_section()
    base = geomean(
        [p for s, c in runs if (p := c.roof.pct(s.baseline.latency_s))], skip_missing=True
    )
    top = geomean([p for s, c in runs if (p := c.roof.pct(s.best.latency_s))], skip_missing=True)
    speed = geomean([s.speedup for s, _ in runs if s.speedup], skip_missing=True)
    versus = geomean([s.speedup_over_reference for s, _ in runs
                                 if s.speedup_over_reference], skip_missing=True)  # fmt: skip
    table.add_row(
        "geomean / total", "", "", "", percent(base), "", percent(top), "", speedup_x(speed),
        speedup_x(versus), usd_plain(total_usd), str(total_tokens), style="bold",
    )  # fmt: skip
    table.caption = escape("\n".join(ceiling_lines(hardware, SUITE_CALIBRATED)))
    return table
