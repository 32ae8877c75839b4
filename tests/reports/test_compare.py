"""Comparing runs: $ per iteration from the recorded calls, the reduced numbers, and the page."""

from __future__ import annotations

import dataclasses

import pytest
from report_helpers import SPEC, assert_self_contained, call, make_fake_run, page_tables, parse
from tuned_run import make_tuned_run

from accelopt.llm.client import Usage
from accelopt.reports.compare import (
    compare_run,
    comparison_json,
    load_comparison,
    models_text,
    render_compare,
    spend_by_iteration,
)
from accelopt.search.evaluations import run_evaluations
from accelopt.store.records import IterationRecord, RunRecord
from accelopt.store.store import Store


def test_each_call_is_charged_to_the_iteration_of_the_planner_before_it():
    calls = [
        call(1, "planner", 0.01, sample=1000),
        call(2, "executor", 0.02),
        call(3, "summarizer", None),  # unknown price: counts 0
        call(4, "planner", 0.03, sample=2001),
        call(5, "executor", 0.04),
        # killed, then resumed: iteration 2 again, its calls replayed at no cost
        call(6, "planner", 0.0, sample=2000, replayed=True),
        call(7, "executor", 0.05),
    ]
    assert spend_by_iteration(calls) == pytest.approx({1: 0.03, 2: 0.12})


def test_the_curve_adds_up_spend_and_follows_the_best(tmp_path):
    run = RunRecord("r0000001", "silu", "small", "cpu", SPEC.key(), "sampling",
                    {"models": {"planner": "a", "executor": "b"}})  # fmt: skip
    iterations = [IterationRecord(t, (), "", None, pct, 0.0, 0) for t, pct in
                  ((0, 0.1), (1, 0.2), (2, 0.2))]  # fmt: skip
    calls = [call(1, "planner", 0.5, sample=1000), call(2, "planner", 0.25, sample=2000)]
    usage = {"planner": Usage(calls=2, tokens_in=300, tokens_out=30, cost_usd=0.75)}
    c = compare_run(run, [], {}, iterations, calls, usage)
    assert [(p.iteration, p.spent_usd, p.best_pct) for p in c.curve] == [
        (0, 0.0, 0.1), (1, 0.5, 0.2), (2, 0.75, 0.2)
    ]  # fmt: skip
    assert c.iterations == 2 and c.best_pct == 0.2 and c.tokens == 330 and c.cost_usd == 0.75
    assert c.label.startswith("r0000001 silu sampling") and "planner=a" in c.label


def test_models_text():
    assert models_text({"planner": "m", "executor": "m"}) == "m"
    assert models_text({"planner": "a", "executor": "b"}) == "planner=a, executor=b"
    assert models_text({}) == "—"


def test_the_comparison_page_has_both_plots(tmp_path):
    with Store.open(tmp_path / "ws") as store:
        runs = [
            make_fake_run(store, "beamrun00001"),
            make_fake_run(store, "samplerun001", strategy="sampling"),
        ]
        comparisons = [load_comparison(store, r) for r in runs]
    first = comparisons[0]
    assert first.best_pct == pytest.approx(0.8) and first.baseline_pct == pytest.approx(0.25)
    assert [p.spent_usd for p in first.curve] == pytest.approx([0.0, 0.03, 0.03])
    assert comparison_json(first)["curve"][2]["best_pct"] == pytest.approx(0.8)
    html = render_compare(comparisons)
    page = parse(html)
    assert {"runs", "by-cost", "by-iteration"} <= page.ids
    assert page.svg_parents == ["by-cost", "by-iteration"]
    assert_self_contained(html, page)
    assert "samplerun001" in html and "sampling" in html


def test_an_autotune_run_says_what_it_tries_and_runs_at_no_cost_get_no_dollar_axis(tmp_path):
    """Defect 16: a $0 run drew a −$0.04..$0.04 axis, and an autotune run showed B·N·K."""
    with Store.open(tmp_path / "ws") as store:
        comparisons = [load_comparison(store, make_tuned_run(store))]
    (tuned,) = comparisons
    assert tuned.search_size == "8 variants per iteration" and tuned.cost_usd == 0
    html = render_compare(comparisons)
    page = parse(html)
    assert page.svg_parents == ["by-iteration"]  # no $ chart: nothing was spent
    assert "every run cost $0" in html
    assert "8 variants per iteration" in html and "B·N·K" not in html
    assert "none (no LLM call)" in html


def test_wall_time_and_candidates_per_minute(tmp_path):
    with Store.open(tmp_path / "ws") as store:
        made = make_fake_run(store)
        run = dataclasses.replace(made, created_at="2026-01-01T10:00:00+00:00",
                                  updated_at="2026-01-01T10:02:00+00:00")  # fmt: skip
        c = compare_run(run, store.kernels(run.id), run_evaluations(store, run), [], [], {})
    assert c.wall_s == 120 and c.candidates == 6 and c.per_minute == pytest.approx(3.0)
    assert c.search_size == "B·N·K = 2·2·1"
    assert comparison_json(c)["candidates_per_minute"] == pytest.approx(3.0)
    headers, rows = next(t for t in page_tables(render_compare([c])) if "wall time" in t[0])
    shown = dict(zip(headers, rows[0], strict=True))
    assert shown["wall time"] == "2 min 00 s" and shown["candidates"] == "6"
    assert shown["per minute"] == "3.0" and shown["search"] == "B·N·K = 2·2·1"
    broken = dataclasses.replace(run, updated_at="")
    assert compare_run(broken, [], {}, [], [], {}).per_minute is None
