"""The run report: its data model (pure) and the page it renders, on a fake run in a store."""

from __future__ import annotations

import pytest
from report_helpers import SPEC, assert_self_contained, make_fake_run, parse

from accelopt.hardware.spec import HardwareSpec
from accelopt.reports.html import unified_diff
from accelopt.reports.run_report import load_run, render_run_report, run_report
from accelopt.store.records import RunRecord
from accelopt.store.store import Store

SECTIONS = {"summary", "results", "progress", "lineage", "best-kernel", "diff", "lessons",
            "failures", "usage", "cost"}  # fmt: skip


@pytest.fixture()
def report(fake_store: Store):
    run = fake_store.get_run("fakerun00001")
    return run_report(load_run(fake_store, run), SPEC)


def test_baseline_best_and_cost_per_point(report):
    assert report.baseline.latency_s == 4e-3 and report.baseline.speedup == 1.0
    assert report.best.hash == "k4" and report.best.speedup == pytest.approx(3.2)
    assert report.best.pct == pytest.approx(0.8)
    assert report.cost.total_usd == pytest.approx(0.03)
    assert report.cost.gain_points == pytest.approx(55.0)
    assert report.cost.usd_per_point == pytest.approx(0.03 / 55)
    assert report.cost.unknown_calls == 1 and report.cost.tokens == 1100


def test_lineage_runs_from_the_baseline_with_plans_and_speedups(report):
    steps = [row.step for row in report.lineage]
    assert [s.hash for s in steps] == ["base", "k1", "k4"]
    assert [s.plan for s in steps] == ["", "Vectorize <the> loop & unroll", "Use OpenMP"]
    assert steps[0].speedup_over_parent is None
    assert steps[1].speedup_over_parent == pytest.approx(2.0)
    assert steps[2].speedup_over_parent == pytest.approx(1.6)
    assert steps[2].speedup_over_baseline == pytest.approx(3.2)


def test_failures_are_grouped_by_status_with_an_example(report):
    found = {f.status: f for f in report.failures}
    assert set(found) == {"COMPILE_ERROR", "INCORRECT"}
    assert found["COMPILE_ERROR"].count == 1 and found["COMPILE_ERROR"].example_hash == "k2"
    assert "unterminated comment" in found["COMPILE_ERROR"].example_error


def test_every_candidate_is_a_point_and_the_best_curve_follows_the_iterations(report):
    assert len(report.candidates) == 6
    assert {c.status for c in report.candidates} == {"PASSED", "COMPILE_ERROR", "INCORRECT"}
    assert [t for t, _ in report.best_curve] == [0, 1, 2]
    assert report.best_curve[-1][1] == pytest.approx(0.8)


def test_usage_per_agent_with_models(report):
    assert [u.agent for u in report.usage] == ["planner", "executor", "fixer", "summarizer"]
    assert report.usage[0].model == "planner-model"
    assert report.usage[2].unknown_cost == 1


def test_ceilings_only_for_the_hardware_the_run_was_measured_on(fake_store: Store):
    data = load_run(fake_store, fake_store.get_run("fakerun00001"))
    assert run_report(data, SPEC).ceilings[0].source == "fma chains, 2026-01-01"
    other = SPEC.model_copy(update={"bandwidth": 1e9})
    assert isinstance(other, HardwareSpec) and other.key() != SPEC.key()
    assert run_report(data, other).ceilings is None
    assert run_report(data, None).ceilings is None


def test_the_diff_marks_added_and_removed_lines():
    lines = unified_diff("a\nb\nc\n", "a\nB\nc\n", "before", "after")
    kinds = [line.kind for line in lines]
    assert kinds == ["file", "file", "hunk", "ctx", "del", "add", "ctx"]
    assert lines[4].text == "-b" and lines[5].text == "+B"


def test_the_page_has_every_section_an_inline_svg_and_nothing_to_fetch(report):
    html = render_run_report(report)
    page = parse(html)
    assert page.ids >= SECTIONS
    assert page.svg_parents == ["progress"]
    assert_self_contained(html, page)
    text = "".join(page.text)
    expected = ("silu", "small", "cpu:report-test", "500.0 GFLOP/s", "Vectorize <the> loop",
                "Use OpenMP", "#pragma omp parallel for", "Vectorize <inner> loops",
                "unterminated comment <here>", "summarizer-model", "+55.0 points")  # fmt: skip
    for snippet in expected:
        assert snippet in text, snippet
    assert "the" not in page.tags and "here" not in page.tags  # user text is escaped
    assert '<span class="add">+  #pragma omp parallel for</span>' in html


def test_a_run_without_kernels_still_renders(tmp_path):
    with Store.open(tmp_path / "ws") as store:
        store.create_run(RunRecord("empty0000001", "silu", "small", "cpu", SPEC.key(), "beam", {}))
        report = run_report(load_run(store, store.get_run("empty0000001")), SPEC)
    html = render_run_report(report)
    page = parse(html)
    assert page.ids >= SECTIONS and page.svg_parents == ["progress"]
    assert report.best is None and report.cost.usd_per_point is None
    assert "no evaluated kernels" in html


def test_two_runs_in_one_store_keep_their_own_lessons_and_kernels(tmp_path):
    with Store.open(tmp_path / "ws") as store:
        make_fake_run(store, "fakerun00001")
        store.create_run(RunRecord("other0000001", "silu", "small", "cpu", SPEC.key(), "beam", {}))
        report = run_report(load_run(store, store.get_run("other0000001")), SPEC)
    assert report.lessons == () and report.candidates == () and report.usage == ()
