"""``accelopt.views``: the JSON and the look-ups the front ends share are the command line's."""

from __future__ import annotations

import pytest

from accelopt import views
from accelopt.cli import bench, common, runs
from accelopt.errors import UserError
from accelopt.problems.loader import load_problem


def test_the_cli_prints_the_views_objects() -> None:
    assert bench.problem_json is views.problem_json
    assert bench.problem_show_json is views.problem_show_json
    assert runs.run_row is views.run_row
    assert runs.run_show_json is views.run_show_json


def test_hardware_for_says_when_it_measures(monkeypatch, hw) -> None:
    """Measuring the machine takes a while: the front end is told first (the cli on its standard
    error), or nothing is said when it asks for silence."""
    monkeypatch.setattr(views, "load_cpu_spec", lambda measure_if_missing: None)
    monkeypatch.setattr(views, "ensure_cpu_spec", lambda: hw)
    said: list[str] = []
    assert views.hardware_for("cpu", said.append) is hw
    assert said == [views.MEASURING]
    assert views.hardware_for("cpu", None) is hw and said == [views.MEASURING]
    for look_up in (views.hardware_for, common.hardware_for):
        with pytest.raises(UserError, match="unknown backend 'fpga'"):
            look_up("fpga")


def test_problem_show_json(hw) -> None:
    silu = load_problem("silu")
    shown = views.problem_show_json(silu, hw, "cpu")
    assert shown["name"] == "silu" and shown["hardware"] == hw.name
    assert [c["workload"] for c in shown["costs"]] == list(silu.workloads)
    assert "baseline" in shown["kernels"] and shown["baseline_source"]


def test_an_evaluations_json_has_the_verdict_first_and_keeps_an_infinite_error(
    make_evaluation,
) -> None:
    """The worker's measurement (``KernelMeasurement``) comes after the verdict, the log last;
    an infinite error stays a float (JSON's Infinity, or "inf" where a caller makes it safe)."""
    data = views.evaluation_json(make_evaluation(max_rel_err=float("inf")))
    keys = list(data)
    assert keys[:2] == ["problem", "workload"] and keys.index("status") < keys.index("latency_s")
    assert keys[-2:] == ["log", "ceilings"]
    assert data["max_rel_err"] == float("inf")
