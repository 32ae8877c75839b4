"""The command line's side of tunables: which kernel a run starts from (a file, or a shipped
``baseline``/``expert``), whether an autotune run has anything to tune, and variant tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from accelopt.cli import common
from accelopt.errors import UserError
from accelopt.formatting import milliseconds, percent
from accelopt.problems.loader import load_problem, suite_names
from accelopt.problems.records import Problem
from accelopt.search.tuning import UNMEASURED, VariantTable, declared

SHIPPED = ("baseline", "expert")


def start_source(problem: Problem, kernel: Path | None, backend: str) -> str | None:
    """The source ``--kernel`` names: a file, or (where no such file exists) the problem's
    shipped ``baseline`` or ``expert``; None without ``--kernel``."""
    if kernel is None:
        return None
    if str(kernel) in SHIPPED and not kernel.exists():
        path = problem.kernel_path(str(kernel), backend)
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
    paths = [p.kernel_path(str(kernel), backend) for p in problems]
    return [path.read_text() if path.is_file() else None for path in paths]


def shipped_with_tunables(backend: str) -> list[str]:
    """The suite's shipped kernels that declare tunables, as ``problem kind``."""
    found = []
    for name in suite_names():
        problem = load_problem(name)
        for kind in SHIPPED:
            path = problem.kernel_path(kind, backend)
            if path.is_file() and declared(path.read_text(), backend):
                found.append(f"{name} --kernel {kind}")
    return found


def has_tunables(problem: Problem, source: str | None, backend: str) -> bool:
    """Whether the kernel a run of ``problem`` starts from (``source``, else the baseline)
    declares tunables."""
    if source is None:
        path = problem.kernel_path("baseline", backend)
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
    """What an autotune run found, in one sentence."""
    rows = [r for t in tables for r in t.rows[1:]]
    unmeasured = sum(r.status in UNMEASURED for r in rows)
    measured = len(rows) - unmeasured
    if best == start and rows and not measured:
        return (
            f"no variant could be evaluated ({unmeasured} of {len(rows)}): the machine failed, "
            "not the variants (the warnings above say why); fix that and run again"
        )
    if best == start:
        missing = f"; {unmeasured} could not be evaluated" if unmeasured else ""
        return (
            f"the kernel as written is already the fastest: none of the {measured} variants "
            f"measured beat it beyond the noise on this machine{missing}"
        )
    faster = f", {speedup:.2f}x as fast" if speedup else ""
    return f"a variant beat the kernel as written beyond the noise{faster} ({measured} measured)"


def variant_table(found: Mapping[str, Any]) -> Table:
    """One kernel's variants (a ``VariantTable`` as JSON): its own row first, then the fastest
    first; ``re-timed``: the time over the kernel's in a session side by side; ``*`` marks the
    run's best kernel."""
    title = f"variants of kernel {found['kernel_hash'][:12]} (iteration {found['iteration']})"
    table = Table(title=title, title_justify="left")
    for col in ("values", "status", "ms", "% of peak", "re-timed", "best"):
        table.add_column(col, justify="left" if col in {"values", "status"} else "right")
    for row in found["rows"]:
        table.add_row(
            row["values"], row["status"], milliseconds(row["latency_s"]),
            percent(row["pct_of_peak"]), session_text(row, found["kernel_hash"]),
            "*" if row["kept"] else "",
        )  # fmt: skip
    return table


def session_text(row: Mapping[str, Any], kernel_hash: str) -> str:
    """A variant's time over the kernel's, re-timed side by side (the verdict that counts: the
    ms beside it are separate evaluations, which carry the machine's drift); '' if never."""
    ratio, ci = row.get("session_ratio"), row.get("session_ci")
    if ratio is None:
        return ""
    spread = f" ± {ci * 100:.1f}%" if ci is not None else ""
    other = row.get("session_reference", "")
    against = f" of {other[:8]}" if other and other != kernel_hash else ""
    return f"{ratio:.3f}x{spread}{against}"
