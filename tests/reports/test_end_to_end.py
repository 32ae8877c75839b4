"""Reports of whole runs: the scripted agent team (tests/search) drives the loop on matmul, its
kernels evaluated by tests/search/fake_runner.py (fixed latencies per variant, behind the real
evaluation cache: the store holds what a run of real kernels leaves); the run report and the
comparison of beam search with repeated sampling are drawn from what the store holds. Runs of
real kernels are reported by tests/search/test_optimize_cli.py."""

from __future__ import annotations

import pytest
from agents_pool import variant
from report_helpers import FAST_EVAL, assert_self_contained, parse

from accelopt.reports.compare import load_comparison, render_compare
from accelopt.reports.run_report import load_run, render_run_report, run_report
from accelopt.search import run as run_module
from accelopt.search.config import SearchConfig
from accelopt.search.run import RunInputs, RunTarget, execute_run, new_run
from accelopt.store.store import Store

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

BEAM = SearchConfig(beam=2, plans=2, samples=1, iterations=2, fixer=1, references=False)
SAMPLING = SearchConfig(
    strategy="sampling", beam=2, plans=1, samples=1, iterations=2, references=False
)


def optimize(store, llm, hw, search):
    run = new_run(store, RunTarget("matmul", "small", "cpu", hw), search, llm, variant("slow"))
    execute_run(store, run, RunInputs(llm, hw, FAST_EVAL), resume=False)
    return store.get_run(run.id)


def test_reports_of_a_scripted_run_and_a_comparison(
    tmp_path, llm, hw, server, accelopt_cache, monkeypatch
):
    from fake_runner import fake_profiler

    monkeypatch.setattr(run_module, "make_profiler", fake_profiler)
    with Store.open(tmp_path / "ws") as store:
        beam = optimize(store, llm, hw, BEAM)
        sampling = optimize(store, llm, hw, SAMPLING)
        report = run_report(load_run(store, beam), hw)
        comparisons = [load_comparison(store, r) for r in (beam, sampling)]
    assert beam.status == "finished"
    assert report.best.speedup > 3 and report.ceilings is not None
    steps = [row.step for row in report.lineage]
    assert steps[0].origin == "baseline" and steps[-1].hash == beam.best_hash
    assert any(step.plan.startswith("variant ") for step in steps[1:])
    assert report.lessons and report.failures  # the broken and wrong variants
    assert {u.agent for u in report.usage} >= {"planner", "executor", "summarizer"}
    assert report.cost.usd_per_point is not None and report.cost.usd_per_point > 0
    html = render_run_report(report)
    page = parse(html)
    assert {"summary", "results", "progress", "lineage", "best-kernel", "diff", "lessons",
            "failures", "usage"} <= page.ids  # fmt: skip
    assert page.svg_parents == ["progress"]
    assert_self_contained(html, page)
    assert 'class="add"' in html and 'class="del"' in html
    assert [c.strategy for c in comparisons] == ["beam", "sampling"]
    for c in comparisons:
        assert [p.iteration for p in c.curve] == [0, 1, 2]
        assert c.curve[-1].spent_usd == pytest.approx(c.cost_usd)
        assert c.best_pct is not None and c.best_pct > c.baseline_pct
    page = parse(render_compare(comparisons))
    assert page.svg_parents == ["by-cost", "by-iteration"]
