"""The command line's side of tunables: which kernel a run starts from (a file, or a shipped
``baseline``/``expert``), whether an autotune run has anything to tune, and variant tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from accelopt.backends.registry import shipped_kernel
from accelopt.cli import common
from accelopt.errors import UserError
from accelopt.formatting import milliseconds, percent
from accelopt.problems.loader import load_problem, suite_names
from accelopt.problems.records import Problem
from accelopt.profiling.stats import SESSION_MIN_NOISE
from accelopt.search.tuner import RACED_IN_SESSION
from accelopt.search.variants import UNMEASURED, VariantRow, VariantTable, declared

SHIPPED = ("baseline", "expert")


def start_source(problem: Problem, kernel: Path | None, backend: str) -> str | None:
    """The source ``--kernel`` names: a file, or (where no such file exists) the problem's
    shipped ``baseline`` or ``expert``; None without ``--kernel``."""
    if kernel is None:
        return None
    if str(kernel) in SHIPPED and not kernel.exists():
        path = shipped_kernel(problem, str(kernel), backend)
        if not path.is_file():
            raise UserError(
                f"{problem.name} ships no {kernel} kernel for the {backend} backend: give a "
                "kernel file with --kernel FILE"
            )
        return path.read_text()
    return common.read_kernel_file(kernel)


def start_sources(
    problems: Sequence[Problem], kernel: Path | None, backend: str
) -> list[str | None]:
    """Each problem's starting source: ``start_source`` for one problem; for several, only a
    shipped kind (``--kernel expert``), None (the baseline) where a problem ships none."""
    if kernel is None:
        return [None] * len(problems)
    if len(problems) == 1:
        return [start_source(problems[0], kernel, backend)]
    if str(kernel) not in SHIPPED or kernel.exists():
        raise UserError("--kernel starts one problem from a file: name exactly one")
    paths = [shipped_kernel(p, str(kernel), backend) for p in problems]
    return [path.read_text() if path.is_file() else None for path in paths]


def shipped_with_tunables(backend: str) -> list[str]:
    """The suite's shipped kernels that declare tunables, as ``problem kind``."""
    found = []
    for name in suite_names():
        problem = load_problem(name)
        for kind in SHIPPED:
            path = shipped_kernel(problem, kind, backend)
            if path.is_file() and declared(path.read_text(), backend):
                found.append(f"{name} --kernel {kind}")
    return found


def has_tunables(problem: Problem, source: str | None, backend: str) -> bool:
    """Whether the kernel a run of ``problem`` starts from (``source``, else the baseline)
    declares tunables."""
    if source is None:
        path = shipped_kernel(problem, "baseline", backend)
        source = path.read_text() if path.is_file() else ""
    return bool(declared(source, backend))


def tunable_problems(
    problems: Sequence[Problem], sources: Sequence[str | None], backend: str
) -> tuple[list[int], list[str]]:
    """Which of ``problems`` (starting from ``sources``) an autotune run can tune (their
    indices) and the names of the others; one sentence (``require_tunables``) when none."""
    pairs = list(zip(problems, sources, strict=True))
    keep = [i for i, (p, s) in enumerate(pairs) if has_tunables(p, s, backend)]
    if not keep:
        require_tunables(problems[0], sources[0], backend)
    return keep, [p.name for i, p in enumerate(problems) if i not in keep]


def require_tunables(problem: Problem, source: str | None, backend: str) -> None:
    """An autotune run needs a starting kernel that declares tunables: else one sentence
    saying which shipped kernels do."""
    if has_tunables(problem, source, backend):
        return
    have = shipped_with_tunables(backend)
    listed = "; ".join(have) if have else "none of the suite's"
    raise UserError(
        f"the starting kernel of {problem.name} declares no tunables, so --strategy autotune has "
        f"nothing to tune (declare some: `#ifndef BM` / `#define BM 64 /* tune: 32 64 128 */` / "
        f"`#endif`, see the README); shipped kernels that declare some: {listed}"
    )


def verdict(tables: Sequence[VariantTable], start: str, best: str, speedup: float | None) -> str:
    """What an autotune run confirmed, in one sentence: a variant kept is named with its
    re-timed speedup over the kernel as written; where none was kept, the best re-timing, and
    a variant that looked faster by separate evaluations but was not re-timed, with why.
    ``speedup``: the run's, by separate evaluations (said only where no re-timing confirms)."""
    rows = [r for t in tables for r in t.rows[1:]]
    unmeasured = sum(r.status in UNMEASURED for r in rows)
    measured = len(rows) - unmeasured
    if best == start and rows and not measured:
        return (
            f"no variant could be evaluated ({unmeasured} of {len(rows)}): the machine failed, "
            "not the variants (the warnings above say why); fix that and run again"
        )
    counted = f"{measured} variants measured" + (
        f", {unmeasured} could not be evaluated" if unmeasured else ""
    )
    if best != start:
        return f"{_kept(rows, best, speedup)} ({counted})"
    table = next((t for t in tables if t.kernel_hash == start), tables[0] if tables else None)
    return f"{_none_kept(table)} ({counted})"


def _kept(rows: Sequence[VariantRow], best: str, speedup: float | None) -> str:
    row = next((r for r in rows if r.kernel_hash == best), None)
    if row is not None and row.speedup is not None:
        found = f"{row.speedup:.2f}x{_within(row.speedup_ci)}"
        if row.speedup > _needed(row.speedup_ci):
            return (
                f"variant {row.values} confirmed {found} faster than the kernel as written "
                "(re-timed side by side)"
            )
        return (
            f"variant {row.values} was kept (found faster when it was tuned), but its last "
            f"re-timing beside the kernel as written reads {found}: not confirmed faster"
        )
    what = f"variant {row.values}" if row is not None else "another kernel"
    by = f" ({speedup:.2f}x by separate evaluations)" if speedup else ""
    return (
        f"{what} was kept{by}, but no re-timing side by side with the kernel as written confirms it"
    )


def _none_kept(table: VariantTable | None) -> str:
    """The kernel as written stays: what the re-timings found, and the variant that looked
    fastest without being re-timed (never "the fastest": it was not confirmed)."""
    head = "no variant confirmed faster than the kernel as written"
    if table is None:
        return head
    own, rows = table.rows[0], table.rows[1:]
    parts = []
    retimed = [r for r in rows if r.speedup is not None]
    if retimed:
        top = max(retimed, key=lambda r: r.speedup or 0.0)
        found = f"best re-timed {top.speedup:.2f}x{_within(top.speedup_ci)} ({top.values})"
        needed = _needed(top.speedup_ci)
        short = f", short of the {needed:.2f}x a session needs to confirm it"
        parts.append(found + (short if (top.speedup or 0.0) <= needed else ""))
    looked = [r for r in rows if r.speedup is None and _faster(r, own)]
    if looked:
        r = min(looked, key=lambda r: r.latency_s or 0.0)
        ratio = (own.latency_s or 0.0) / (r.latency_s or 1.0)
        spread = f"±{_pm(r.ci)} and ±{_pm(own.ci)}" if r.ci and own.ci else "no interval"
        parts.append(
            f"{r.values} looked {ratio:.2f}x faster by separate evaluations ({spread}) "
            f"but {_not_retimed(r)}"
        )
    elif not retimed:
        parts.append("none measured faster, so none was re-timed side by side")
    return "; ".join([head, *parts])


def _needed(ci: float | None) -> float:
    """The speedup a re-timing with interval ``ci`` must pass to confirm a gain
    (``stats.faster``: beyond twice the interval, in log space, and twice its floor)."""
    return (1.0 + max(SESSION_MIN_NOISE, ci or 0.0)) ** 2


def _faster(row: VariantRow, own: VariantRow) -> bool:
    return bool(row.latency_s and own.latency_s and row.latency_s < own.latency_s)


def _not_retimed(row: VariantRow) -> str:
    """Why a variant that looked faster is not confirmed (``Tuner``)."""
    if row.by_evaluations == "not faster":
        return "was not re-timed: that gain is within those evaluations' noise"
    if row.session_speedup is not None:
        return f"was re-timed only against {row.session_reference[:8]}"
    return (
        f"was not re-timed (each tuning re-times its {RACED_IN_SESSION} fastest-looking contenders)"
    )


def _within(ci: float | None) -> str:
    return f" ±{_pm(ci)}" if ci is not None else ""


def _pm(ci: float | None) -> str:
    return f" {percent(ci, ' %')}"


LEGEND = (
    "speedup: the kernel as written's time over the variant's, re-timed side by side in one "
    "session (above 1 is faster; blank: not re-timed). It is the verdict that counts: the ms are "
    "separate evaluations, which carry the machine's drift. ±: the half-width of the ms's 95 % "
    "interval. % of peak: peak ms / ms, one roofline time for every row. Sorted by re-timed "
    "speedup, then ms."
)


def variant_table(found: Mapping[str, Any], since: str = "") -> Table:
    """One kernel's variants (a ``VariantTable`` as JSON): its own row first, then in the order
    that decides (``LEGEND``); ``*`` marks the run's best kernel. ``since``: when the run started;
    a row measured before it (read from the evaluation cache) is named under the table, with
    when and under what load it was measured."""
    title = f"variants of kernel {found['kernel_hash'][:12]} (iteration {found['iteration']})"
    caption = "\n".join([LEGEND, *carried_from_cache(found["rows"], since)])
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for col in ("values", "status", "ms", "±", "peak ms", "% of peak", "speedup", "best"):
        table.add_column(col, justify="left" if col in {"values", "status"} else "right")
    peak = found.get("peak_s")
    for i, row in enumerate(found["rows"]):
        ci = row.get("ci")
        table.add_row(
            Text(row["values"]),
            row["status"],
            milliseconds(row["latency_s"]),
            f"±{percent(ci)}" if ci is not None else "",
            milliseconds(peak),
            percent(row["pct_of_peak"]),
            "1.00x" if i == 0 else session_text(row, found),
            "*" if row["kept"] else "",
        )
    return table


def carried_from_cache(rows: Sequence[Mapping[str, Any]], since: str) -> list[str]:
    """A line naming the rows whose figures were measured before ``since`` (an earlier run's,
    from the evaluation cache): when, and the share of the CPUs others used meanwhile."""
    old = [r for r in rows if since and r.get("measured_at") and r["measured_at"] < since]
    if not old:
        return []
    said = [f"{r['values']} on {r['measured_at']}" + _load(r.get("load_others")) for r in old]
    return ["carried from the evaluation cache (measured before this run): " + "; ".join(said)]


def _load(share: float | None) -> str:
    return f", others using {share:.0%} of the CPUs" if share is not None else ""


def session_text(row: Mapping[str, Any], found: Mapping[str, Any]) -> str:
    """A variant's speedup over the kernel as written, re-timed side by side (above 1 is faster;
    ``via`` an earlier winner where it was re-timed against that one), or over the kernel it was
    re-timed against where no chain leads to the kernel as written; '' if never re-timed."""
    ratio, kernel = row.get("session_ratio"), found["kernel_hash"]
    if not ratio:
        return ""
    other = row.get("session_reference", "")
    speedup, ci = row.get("speedup"), row.get("speedup_ci")
    if speedup is None:
        speedup, ci = 1.0 / ratio, row.get("session_ci")
        against = f" over {other[:8]}" if other and other != kernel else ""
    else:
        against = f" (via {other[:8]})" if other and other != kernel else ""
    spread = f" ± {percent(ci)}" if ci is not None else ""
    return f"{speedup:.2f}x{spread}{against}"
