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
from rich.markup import escape
from rich.table import Table

from accelopt import settings
from accelopt.backends.registry import reference_kinds
from accelopt.backends.status import Status
from accelopt.cli.cells import error_cell
from accelopt.cli.one_ceiling import (
    CALIBRATED_COLUMNS,
    SUITE_CALIBRATED,
    Roof,
    calibrated_cells,
    ceiling_lines,
    problem_roof,
    roof_of,
    titled,
)
from accelopt.errors import UserError
from accelopt.formatting import DASH, milliseconds, percent, scientific, speedup_x
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.stats import geomean
from accelopt.search.references import fastest_reference

# Piped output (CI logs, files) gets a width that fits the tables instead of rich's default 80.
_WIDTH = None if sys.stdout.isatty() or settings.columns_set() else 220
console = Console(width=_WIDTH)
err_console = Console(stderr=True, width=_WIDTH)

_STATUS_STYLE = {Status.PASSED: "green", Status.SUSPICIOUS: "magenta"}


def calibrated_peak(e: Evaluation) -> float | None:
    """The roofline time at the control timed with ``e`` (None where it was not calibrated)."""
    return e.calibration.peak_s if e.calibration is not None else None


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


def evaluations_table(
    evaluations: Sequence[Evaluation],
    title: str,
    problems: Sequence[Problem] = (),
    hardware: HardwareSpec | None = None,
) -> Table:
    """A row per evaluation, against one ceiling (``one_ceiling``): ms, its interval, the
    roofline at ``hardware``'s cached ceilings (``problems``: the evaluations' cost models; without
    them, each evaluation's own cached roofline), % of peak and the rate achieved; where a kernel
    was calibrated, the roofline at its control's figure and the % against it."""
    by_name = {p.name: p for p in problems}
    roofs = [roof_of(e, by_name.get(e.problem), hardware) for e in evaluations]
    calibrated = any(e.calibration for e in evaluations)
    table = Table(title=titled(title, hardware), title_justify="left", caption_justify="left")
    for name, justify in [
        ("problem", "left"),
        ("status", "left"),
        ("ms", "right"),
        ("ms ± (95% CI)", "right"),
        ("peak ms", "right"),
        ("% of peak", "right"),
        ("achieved", "right"),
        *([("calibrated peak ms", "right"), ("calibrated %", "right")] if calibrated else []),
        ("bound", "left"),
        ("noise", "right"),
        ("rel err", "right"),
    ]:
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("error", ratio=1, overflow="fold")
    for e, roof in zip(evaluations, roofs, strict=True):
        table.add_row(
            e.problem,
            status_text(e.status) + (" [yellow](disturbed)[/yellow]" if e.disturbed else ""),
            milliseconds(e.latency_s),
            percent(e.ci),
            milliseconds(roof.peak_s),
            *roof.cells(e.latency_s),
            *(calibrated_cells(calibrated_peak(e), e.latency_s) if calibrated else []),
            roof.bound,
            percent(e.noise),
            scientific(e.max_rel_err),
            error_cell(e.error),  # verbatim ([j] is not markup), cut at a word
        )
    lines = ceiling_lines(hardware, CALIBRATED_COLUMNS if calibrated else "")
    table.caption = escape("\n".join(lines))
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


def _cells(e: Evaluation | None, roof: Roof | None, kind: str) -> list[str]:
    """A kind's cells in a suite row (``_columns``): ms and % of the row's peak (in one cell,
    ``ms (%)``, for ``ONE_COLUMN``), and the expert's rate achieved; a failure's status."""
    width = len(_columns(kind))
    if e is None or roof is None:
        return [""] * width
    if e.status is not Status.PASSED:
        return [status_text(e.status)] + [DASH] * (width - 1)
    ms = milliseconds(e.latency_s) if e.latency_s is not None else "ok"
    pct, rate = roof.cells(e.latency_s)
    if kind in ONE_COLUMN:
        return [f"{ms} ({pct})" if e.latency_s else ms]
    return [ms, pct, rate][:width]


def _columns(kind: str) -> list[str]:
    """A kind's columns in the suite table: the references' ms and % in one (the table stays
    readable at 200 columns), the expert's rate achieved beside its %."""
    if kind in ONE_COLUMN:
        return [f"{kind} ms (%)"]
    return [f"{kind} ms", f"{kind} %"] + ([f"{kind} achieved"] if kind == "expert" else [])


ONE_COLUMN = ("numpy", "torch", "inductor", "max-autotune")


def versus_reference(kind: str | None, speedup: float | None) -> str:
    """A kernel's speedup over the best reference, with the reference's kind: ``1.25x (numpy)``;
    — without one (the optimize summary, runs list and runs compare say it alike)."""
    return f"{speedup_x(speedup)} ({kind})" if kind and speedup else "—"


def best_reference(by_key: dict[tuple[str, str], Evaluation], problem: str) -> Evaluation | None:
    """The fastest reference that passed for ``problem`` (NumPy, torch eager, torch.compile in
    either mode)."""
    return fastest_reference(by_key.get((problem, kind)) for kind in reference_kinds())


def _versus(expert: Evaluation | None, ref: Evaluation | None, ratios: list[float]) -> list[str]:
    """The best reference's cell, and the expert's speedup over it (measured in this run)."""
    if ref is None or ref.latency_s is None:
        return ["—", "—"]
    cell = f"{ref.kernel} {milliseconds(ref.latency_s)}"
    if expert is None or not expert.passed or not expert.latency_s:
        return [cell, "—"]
    ratios.append(ref.latency_s / expert.latency_s)  # a speedup: above 1, the expert is faster
    return [cell, f"{ratios[-1]:.2f}x"]


def suite_table(
    problems: Sequence[Problem],
    kinds: Sequence[str],
    evaluations: Sequence[Evaluation],
    title: str,
    hardware: HardwareSpec | None = None,
) -> Table:
    """A row per problem against one ceiling (``one_ceiling``): bound, the roofline at
    ``hardware``'s cached ceilings (without it, the first evaluation's cached roofline), then ms
    and % of that peak per kernel kind, the expert's rate achieved beside its %; geometric
    means. The calibrated figures are in the JSON (the caption says so)."""
    by_key = {(e.problem, e.kernel): e for e in evaluations}
    roofs = {p.name: problem_roof(p, evaluations, hardware) for p in problems}
    table = Table(title=titled(title, hardware), title_justify="left", caption_justify="left")
    table.add_column("problem", no_wrap=True)
    table.add_column("bound")
    table.add_column("peak ms", justify="right", no_wrap=True)
    for column in (column for kind in kinds for column in _columns(kind)):
        table.add_column(column, justify="right", no_wrap=not column.endswith("achieved"))
    compare = any(kind in reference_kinds() for kind in kinds) and "expert" in kinds
    if compare:
        table.add_column("best reference", justify="right", no_wrap=True)
        table.add_column("expert speedup", justify="right")
    ratios: list[float] = []
    for p in problems:
        roof = roofs[p.name]
        row = [p.name, roof.bound if roof else "", milliseconds(roof.peak_s) if roof else ""]
        for kind in kinds:
            row.extend(_cells(by_key.get((p.name, kind)), roof, kind))
        if compare:
            row.extend(
                _versus(by_key.get((p.name, "expert")), best_reference(by_key, p.name), ratios)
            )
        table.add_row(*row)
    table.add_section()
    table.add_row(
        *_suite_means(kinds, evaluations, roofs, ratios if compare else None), style="bold"
    )
    calibrated = any(e.calibrated or e.calibration is not None for e in evaluations)
    lines = ceiling_lines(hardware, SUITE_CALIBRATED if calibrated else "")
    table.caption = escape("\n".join(lines))
    return table


def _suite_means(
    kinds: Sequence[str],
    evaluations: Sequence[Evaluation],
    roofs: dict[str, Roof | None],
    ratios: list[float] | None,
) -> list[str]:
    """The geomean row: per kind, the geometric mean of its % of peak (how many passed); the
    expert's speedup over the best reference (above 1: faster)."""
    means = ["geomean", "", ""]
    for kind in kinds:
        passed = [e for e in evaluations if e.kernel == kind and e.passed]
        pcts = [roof.pct(e.latency_s) for e in passed if (roof := roofs.get(e.problem))]
        mean = geomean([p for p in pcts if p is not None], skip_missing=True)
        shown = f"{percent(mean)} ({len(passed)})" if mean is not None else DASH
        means.extend([shown] if kind in ONE_COLUMN else ["", shown, *([""] * (kind == "expert"))])
    if ratios is not None:
        mean_ratio = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
        means.extend(["", f"{mean_ratio:.2f}x ({len(ratios)})" if mean_ratio else DASH])
    return means
