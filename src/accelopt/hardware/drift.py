"""How much this machine moves between evaluations, from the controls timed with its kernels.

Every calibrated evaluation times a control (``profiling/worker/control.py``); its figure (the
median of the evaluation's controls) is appended here, one JSON line per figure, per machine
(``cache.machine_key``). The spread of a control's recent figures is what the machine did between
evaluations: neighbours that came and went, the clock, memory contention the load average does
not show. Reported intervals include it (``profiling/parent/calibration.py``), so that one
evaluation's interval covers another's median.

The drift is the largest, over the kinds of control with MIN_FIGURES recent figures, of
(high - low) / low, where high and low are the 95th and 5th percentiles of its last figures (their
extremes while there are fewer than 20). A machine with no such history drifts PRIOR, as much as
the noisiest machine this project measured (a cloud VM: medians 8-14 % apart between processes).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelopt import settings

PRIOR = 0.10
MIN_FIGURES = 3
LAST = 60  # figures of each kind that count
WINDOW_S = 24 * 3600  # ... from this long ago at most
KEEP_LINES = 400  # the file is cut back to its last KEEP_LINES / 2 lines beyond this


@dataclass(frozen=True)
class Figure:
    at: float  # seconds since the epoch
    kind: str  # the control: "fma", "vector", "memory 2:1"
    rate: float


def history_path() -> Path:
    from accelopt.hardware.cache import machine_key  # cache imports the micro-benchmarks

    return settings.cache_dir() / "hardware" / f"{machine_key()}.controls.jsonl"


def read(path: Path) -> list[Figure]:
    """The figures recorded at ``path``; unreadable lines are skipped, a missing file is empty."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    figures = []
    for line in lines:
        try:
            raw = json.loads(line)
            figures.append(Figure(float(raw["at"]), str(raw["kind"]), float(raw["rate"])))
        except (ValueError, KeyError, TypeError):
            continue
    return figures


def record(kind: str, rate: float, path: Path | None = None, at: float | None = None) -> None:
    """Append one control figure (an append of one short line: concurrent writers interleave
    whole lines), cutting the file back when it grows past KEEP_LINES."""
    path = path or history_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"at": at or time.time(), "kind": kind, "rate": rate}) + "\n"
    with open(path, "a") as f:
        f.write(line)
    if path.stat().st_size > KEEP_LINES * 80:
        _trim(path)


def _trim(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    if len(lines) <= KEEP_LINES:
        return
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(lines[-KEEP_LINES // 2 :]))
    os.replace(tmp, path)


def spread(rates: Iterable[float]) -> float:
    """(high - low) / low of a control's figures: 95th and 5th percentiles, or the extremes of
    fewer than 20."""
    values = np.asarray(list(rates), dtype=np.float64)
    if values.size < 2:
        return 0.0
    if values.size < 20:
        low, high = values.min(), values.max()
    else:
        low, high = np.percentile(values, [5, 95])
    return float((high - low) / low) if low > 0 else 0.0


def drift_of(figures: Iterable[Figure], now: float) -> float | None:
    """The machine's drift from ``figures`` (the module's docstring), or None without history."""
    by_kind: dict[str, list[float]] = {}
    for f in sorted(figures, key=lambda f: f.at):
        if now - f.at <= WINDOW_S:
            by_kind.setdefault(f.kind, []).append(f.rate)
    spreads = [spread(r[-LAST:]) for r in by_kind.values() if len(r) >= MIN_FIGURES]
    return max(spreads) if spreads else None


def machine_drift(path: Path | None = None) -> float:
    """This machine's drift between evaluations now: from its history, else PRIOR."""
    found = drift_of(read(path or history_path()), time.time())
    return PRIOR if found is None else found
