"""`runs show` prints an LLM's plan and the run's parameters verbatim: ``[i]`` in a plan is an
index, not markup (issue 46's rule for text a user did not write)."""

from __future__ import annotations

import io

from rich.console import Console

from accelopt.cli import runs


def test_a_plan_with_brackets_is_shown_as_written(monkeypatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(runs, "console", Console(file=out, width=200, color_system=None))
    payload = {
        "run": "r1", "problem": "silu", "workload": "tiny", "hardware": "cpu:test",
        "strategy": "beam", "status": "finished",
        "config": {"search": {"beam": [2, 3]}, "models": "m[i]"},
        "iterations": [],
        "lineage": [{"iteration": 1, "hash": "abc", "origin": "executor",
                     "plan": "block y[i] by [bold]8[/bold]", "latency_s": 1e-3,
                     "speedup_over_parent": 1.5}],
    }  # fmt: skip
    runs._print_show(payload)
    shown = out.getvalue()
    assert "block y[i] by [bold]8[/bold]" in shown
    assert "models: m[i]" in shown
