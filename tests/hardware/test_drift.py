"""The machine's drift between evaluations, from the controls' history (``hardware/drift.py``)."""

from __future__ import annotations

import pytest

from accelopt.hardware import drift
from accelopt.hardware.drift import Figure, drift_of, machine_drift, read, record, spread

NOW = 1_000_000.0


def figures(kind: str, *rates: float, at: float = NOW) -> list[Figure]:
    return [Figure(at - i, kind, rate) for i, rate in enumerate(rates)]


def test_without_history_the_machine_drifts_the_prior(tmp_path):
    assert machine_drift(tmp_path / "none.jsonl") == drift.PRIOR
    assert drift_of(figures("fma", 1.0, 1.0), NOW) is None  # fewer than MIN_FIGURES


def test_the_drift_is_the_largest_spread_of_any_control():
    found = figures("fma", 100.0, 101.0, 99.0) + figures("memory 2:1", 40.0, 28.0, 39.0)
    assert drift_of(found, NOW) == pytest.approx(12 / 28)


def test_old_figures_and_old_neighbours_no_longer_count():
    old = figures("memory 1:1", 10.0, 10.0, 10.0, at=NOW - 2 * drift.WINDOW_S)
    assert drift_of(old + figures("memory 1:1", 40.0, 40.0, 40.0), NOW) == 0.0


def test_spread_uses_percentiles_of_many_figures():
    rates = [100.0] * 38 + [1.0, 1000.0]  # two outliers among forty
    assert spread(rates) == pytest.approx(0.0, abs=0.5)
    assert spread([10.0, 15.0]) == pytest.approx(0.5)


def test_figures_are_appended_read_back_and_trimmed(tmp_path, monkeypatch):
    path = tmp_path / "m.controls.jsonl"
    monkeypatch.setattr(drift, "KEEP_LINES", 20)
    for i in range(60):
        record("fma", 100.0 + i, path=path, at=NOW + i)
    path.write_text(path.read_text() + "not json\n")
    kept = read(path)
    assert 10 <= len(kept) <= 40 and kept[-1].rate == 159.0
    assert machine_drift(path) >= 0.0
