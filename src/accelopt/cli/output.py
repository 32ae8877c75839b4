"""Rendering results: rich tables for people, JSON for programs (``--json PATH``, ``-``: stdout)."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from accelopt import settings
from accelopt.backends.base import REFERENCE_KINDS
from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.formatting import milliseconds, percent, scientific, speedup_x
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.rescoring import CACHED_MARK, cached_peak, ceiling_notes
from accelopt.profiling.parent.scoring import geometric_mean_pct
from accelopt.search.references import fastest_reference
from accelopt.search.workloads import Generalization

# Piped output (CI logs, files) gets a width that fits the tables instead of rich's default 80.
_WIDTH = None if sys.stdout.isatty() or settings.columns_set() else 220
console = Console(width=_WIDTH)
err_console = Console(stderr=True, width=_WIDTH)

_STATUS_STYLE = {Status.PASSED: "green", Status.SUSPICIOUS: "magenta"}


def check_writable(path: Path, option: str, make_parents: bool = False) -> Path:
    """``path`` when a file can be written there now (created, or an existing one overwritten;
    with ``make_parents``, missing directories created); else a UserError naming ``option``.
    Commands check their output paths before the work, so no result is lost to a bad path."""
    shown = f"{option} {str(path)!r}"
    if path.is_dir():
        example = str(path / "result.json")
        raise UserError(f"{shown} is a directory: give a file path, such as {example!r}")
    folder = _nearest_existing(path.parent) if make_parents else path.parent
    if not folder.is_dir():
        state = "is not a directory" if folder.exists() else "does not exist"
        raise UserError(
            f"{shown} cannot be written: {str(folder)!r} {state}; create that directory or "
            "give another path"
        )
    try:
        _probe_write(path, folder)
    except OSError as exc:
        raise UserError(
            f"{shown} cannot be written ({exc.strerror or exc}): give a path in a directory you "
            "can write"
        ) from None
    return path


def _nearest_existing(folder: Path) -> Path:
    """``folder`` or its nearest ancestor that exists."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _probe_write(path: Path, folder: Path) -> None:
    """Raise OSError unless ``path`` can be written (in ``folder``, its nearest existing
    directory); leaves the file system as it was."""
    if path.exists():
        if not os.access(path, os.W_OK):
            raise PermissionError(13, "Permission denied")
    elif folder != path.parent:  # its directories are made later: they must be makeable here
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    else:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        path.unlink()


def writable_option(option: str) -> Callable[[Path | None], Path | None]:
    """A typer callback that checks an output path option whose missing directories are made
    (``check_writable``), at parse time: before the command's work."""

    def check(value: Path | None) -> Path | None:
        return None if value is None else check_writable(value, option, make_parents=True)

    return check


def _check_json_target(value: str | None) -> str | None:
    if value is not None and value != "-":
        check_writable(Path(value), "--json")
    return value


JsonOption = Annotated[
    str | None,
    typer.Option(
        "--json",
        help="also write JSON to this path ('-' for stdout)",
        callback=_check_json_target,
    ),
]


def write_json(target: str | None, payload: Any) -> None:
    """Write ``payload`` to ``target`` ('-' for stdout); nothing when target is None."""
    if target is None:
        return
    text = json.dumps(payload, indent=2, default=str)
    if target == "-":
        sys.stdout.write(text + "\n")
        return
    try:
        Path(target).write_text(text + "\n")
    except OSError as exc:
        raise UserError(
            f"cannot write --json {target!r} ({exc.strerror or exc}): give a path in a directory "
            "you can write"
        ) from None


def shows_table(json_target: str | None) -> bool:
    """The table goes to stdout unless stdout carries the JSON."""
    return json_target != "-"


# The tables' figures, written as ``accelopt.formatting`` writes them: ms without the unit (the
# column header has it), a fraction as a percentage to a tenth.


def status_text(status: Status) -> str:
    style = _STATUS_STYLE.get(status, "red")
    return f"[{style}]{status.value}[/{style}]"


def evaluations_table(evaluations: Sequence[Evaluation], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for name, justify in [
        ("problem", "left"), ("status", "left"), ("ms", "right"), ("ms ± (95% CI)", "right"),
        ("peak ms", "right"), ("% peak", "right"), ("cached %", "right"),
        ("calibrated %", "right"), ("bound", "left"), ("noise", "right"), ("rel err", "right"),
    ]:  # fmt: skip
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("error", ratio=1, overflow="fold")
    for e in evaluations:
        table.add_row(
            e.problem,
            status_text(e.status) + (" [yellow](disturbed)[/yellow]" if e.disturbed else ""),
            milliseconds(e.latency_s),
            percent(e.ci),
            milliseconds(e.peak_s),
            percent(e.pct_of_peak),
            percent(e.cached_pct),
            percent(e.calibrated_pct),
            e.bound,
            percent(e.noise),
            scientific(e.max_rel_err),
            Text(e.error[:120]),  # verbatim: [j] in compiler output is not markup
        )
    return table


NOISY = 0.05  # IQR / median above which a timing is called noisy
IMPRECISE = 0.02  # the median's 95 % interval half-width above which it is called imprecise


def _with_drift(e: Evaluation) -> str:
    """How much wider the table's ± column is, and why: the machine's drift between evaluations
    (the column is the interval that covers another evaluation's median)."""
    if e.session_ci is None or e.ci is None or e.ci <= e.session_ci * 1.05:
        return ""
    return f" (±{percent(e.ci)} in the table, with the machine's drift between evaluations)"


def timing_warnings(evaluations: Sequence[Evaluation]) -> list[str]:
    """Lines warning that figures were taken on a busy machine or are noisy (a pure function):
    such kernels still pass; their figures are just less comparable."""
    lines = []
    for e in evaluations:
        if e.latency_s is None:
            continue
        why = []
        if e.disturbed:
            seen = (e.clean_batches or 0) + (e.disturbed_batches or 0)
            why.append(
                f"DISTURBED: only {e.clean_batches} of {seen} timed batches ran with the machine "
                "to themselves (other processes held the kernel's CPUs); the figure is not final "
                "and is not used to rank or export"
            )
        elif e.disturbed_batches:
            why.append(f"{e.disturbed_batches} disturbed batches left out")
        if e.loaded:
            why.append(
                f"other work used {percent(e.load_others)} of the CPUs"
                + (f", steal {percent(e.load_steal)}" if (e.load_steal or 0) > 0.005 else "")
            )
        if (e.noise or 0.0) > NOISY:
            why.append(f"noise (IQR/median) {percent(e.noise)}")
        within = e.session_ci if e.session_ci is not None else e.ci  # the timing's own
        if (within or 0.0) > IMPRECISE:
            why.append(f"median known to ±{percent(within)} within its timing" + _with_drift(e))
        if why:
            lines.append(f"{e.problem} / {e.kernel}: {'; '.join(why)}")
    if lines:
        lines.insert(
            0,
            "warning: some timings were taken on a busy machine or are noisy; the kernels are "
            "judged all the same, but re-run on a quiet machine before comparing these figures:",
        )
    return lines


def isolation_warnings(evaluations: Sequence[Evaluation]) -> list[str]:
    """Lines naming the kernels that ran with a sandbox layer missing (a pure function): no system
    call filter (only with ACCELOPT_UNSANDBOXED=1) or the worker's host network namespace."""
    lines = []
    for e in evaluations:
        missing = []
        if e.isolation and e.isolation.get("seccomp") != "1":  # {}: no kernel process ran
            missing.append("no system call filter (ACCELOPT_UNSANDBOXED=1)")
        if e.network_isolated is False:
            missing.append("the host's network namespace (unshare refused)")
        if missing:
            lines.append(f"warning: {e.problem} / {e.kernel} ran with {' and '.join(missing)}")
    return lines


def _cell(e: Evaluation | None) -> tuple[str, str]:
    if e is None:
        return "", ""
    if e.status is not Status.PASSED:
        return status_text(e.status), "—"
    ms = milliseconds(e.latency_s) if e.latency_s is not None else "ok"
    if e.pct_of_peak is None:
        return ms, percent(None)
    return ms, percent(e.pct_of_peak) + ("" if e.calibrated else CACHED_MARK)


ONE_COLUMN = ("numpy", "torch", "inductor", "max-autotune")


def versus_reference(kind: str | None, speedup: float | None) -> str:
    """A kernel's speedup over the best reference, with the reference's kind: ``1.25x (numpy)``;
    — without one (the optimize summary, runs list and runs compare say it alike)."""
    return f"{speedup_x(speedup)} ({kind})" if kind and speedup else "—"


def best_reference(by_key: dict[tuple[str, str], Evaluation], problem: str) -> Evaluation | None:
    """The fastest reference that passed for ``problem`` (NumPy, torch eager, torch.compile in
    either mode)."""
    return fastest_reference(by_key.get((problem, kind)) for kind in REFERENCE_KINDS)


def _versus(expert: Evaluation | None, ref: Evaluation | None, ratios: list[float]) -> list[str]:
    """The best reference's cell, and the expert's time over it (measured in this run)."""
    if ref is None or ref.latency_s is None:
        return ["—", "—"]
    cell = f"{ref.kernel} {milliseconds(ref.latency_s)}"
    if expert is None or not expert.passed or not expert.latency_s:
        return [cell, "—"]
    ratios.append(expert.latency_s / ref.latency_s)
    return [cell, f"{ratios[-1]:.2f}x"]


def suite_table(
    problems: Sequence[Problem],
    kinds: Sequence[str],
    evaluations: Sequence[Evaluation],
    title: str,
    hardware: HardwareSpec | None = None,
) -> Table:
    """A row per problem: bound, the roofline at the cached ceilings, then ms and % of peak per
    kernel kind; geometric means. A % against the cached ceiling, not calibrated by a control
    timed with the kernel, ends with ``CACHED_MARK``; the caption says which ceilings
    (``hardware``: the spec every evaluation was scored against, ``rescoring.rescore_all``)."""
    by_key = {(e.problem, e.kernel): e for e in evaluations}
    table = Table(title=title, title_justify="left", caption_justify="left")
    table.add_column("problem", no_wrap=True)
    table.add_column("bound")
    table.add_column("cached peak ms", justify="right")
    for kind in kinds:
        if kind in ONE_COLUMN:  # ms and % in one cell: the table stays readable at 200 columns
            table.add_column(f"{kind} ms (%)", justify="right", no_wrap=True)
            continue
        table.add_column(f"{kind} ms", justify="right", no_wrap=True)
        table.add_column(f"{kind} %", justify="right")
    compare = any(kind in REFERENCE_KINDS for kind in kinds) and "expert" in kinds
    if compare:
        table.add_column("best reference", justify="right", no_wrap=True)
        table.add_column("expert / it", justify="right")
    ratios: list[float] = []
    for p in problems:
        first = next((e for e in evaluations if e.problem == p.name), None)
        peak = milliseconds(cached_peak(first)) if first else ""
        row = [p.name, first.bound if first else "", peak]
        for kind in kinds:
            cell = _cell(by_key.get((p.name, kind)))
            row.extend([f"{cell[0]} ({cell[1]})" if cell[1] not in ("—", "") else cell[0]]
                       if kind in ONE_COLUMN else cell)  # fmt: skip
        if compare:
            row.extend(_versus(by_key.get((p.name, "expert")), best_reference(by_key, p.name),
                               ratios))  # fmt: skip
        table.add_row(*row)
    means = ["geomean", "", ""]
    for kind in kinds:
        passed = [e for e in evaluations if e.kernel == kind and e.passed]
        mean = geometric_mean_pct([e.pct_of_peak for e in passed if e.pct_of_peak is not None])
        cached = sum(1 for e in passed if e.pct_of_peak is not None and not e.calibrated)
        count = f"{len(passed)}, {cached}{CACHED_MARK}" if cached else f"{len(passed)}"
        shown = f"{percent(mean)} ({count})" if mean is not None else "—"
        means.extend([shown] if kind in ONE_COLUMN else ["", shown])
    if compare:
        mean_ratio = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
        means.extend(["", f"{mean_ratio:.2f}x ({len(ratios)})" if mean_ratio else "—"])
    table.add_section()
    table.add_row(*means, style="bold")
    table.caption = "\n".join(ceiling_notes(evaluations, hardware)) or None
    return table


def generalization_table(g: Generalization) -> Table:
    """Baseline vs best on each workload of a run, tuned-on first, then the geometric means of
    the tuned and the held-out workloads."""
    table = Table(title="generalization: baseline vs best per workload", title_justify="left")
    for col in ("workload", "role", "sizes", "baseline ms", "baseline %", "best ms", "best %",
                "speedup"):  # fmt: skip
        table.add_column(col, justify="left" if col in {"workload", "role", "sizes"} else "right")
    for r in g.rows:
        sizes = ", ".join(f"{k}={v}" for k, v in r.sizes.items())
        best_ms = milliseconds(r.best_latency_s)
        if r.best_latency_s is None:
            best_ms = r.best_status or "not measured"
        table.add_row(
            r.workload, r.role, sizes, milliseconds(r.baseline_latency_s), percent(r.baseline_pct),
            best_ms, percent(r.best_pct), speedup_x(r.speedup),
        )  # fmt: skip
    table.add_section()
    for group in g.groups:
        table.add_row(
            f"geomean ({group.workloads})", group.role, "", "", percent(group.baseline_pct), "",
            percent(group.best_pct), speedup_x(group.speedup),
            style="bold",
        )  # fmt: skip
    return table
