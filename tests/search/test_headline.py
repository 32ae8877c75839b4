"""A run's headline is measured in that run, side by side (issue 46, defect 1): at its end the
starting kernel and the best are re-timed interleaved in one session, and that session's ratio is
the speedup the summary, ``runs list`` and the optimize table report, with its interval.

The user's case: "best 10.939 ms" came from the starting kernel's cached evaluation of an earlier,
busy run, while the session re-timings put it at about 4.2 ms. Here the cache holds a stale
evaluation of the starting kernel 3x slower than it is; the fake runner (fixed latencies per
variant, a session finds each kernel at its latency's ratio to the first) is the truth."""

from __future__ import annotations

import pytest
from agents_pool import variant
from fake_runner import LATENCY_S, FakeRunner, variant_of

from accelopt import views
from accelopt.backends.kernel import Kernel
from accelopt.cli.optimize import headline_caption, headline_speedup
from accelopt.problems import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.search.config import SearchConfig
from accelopt.search.headline import FINAL, headline_of
from accelopt.search.retimings import RetimingRecord
from accelopt.search.run import RunInputs, RunTarget, execute_run, new_run
from accelopt.search.summary import run_summary
from accelopt.store.store import Store
from conftest import FAST_EVAL

STALE = 3.0  # how much slower the cached figure of the starting kernel reads than the truth
ONE = SearchConfig(beam=1, plans=2, samples=1, iterations=1, fixer=0, memory="off")


TUNABLE = "\n#ifndef BM\n#define BM 64 /* tune: 32 64 128 */\n#endif\n"


def _stale_start(store: Store, hw, source: str) -> None:
    """The starting kernel's evaluation in the cache, from "an earlier, busy run"."""
    problem = load_problem("matmul")
    kernel = Kernel(source, "cpu", "baseline")
    true = FakeRunner(hw, EvalConfig()).evaluate(kernel, problem, "small")
    assert true.latency_s is not None and true.pct_of_peak is not None
    stale = true.model_copy(update={
        "latency_s": true.latency_s * STALE, "pct_of_peak": true.pct_of_peak / STALE,
    })  # fmt: skip
    store.put_evaluation(stale)


def test_the_headline_is_the_closing_session_not_a_stale_cached_figure(
    tmp_path, llm, hw, server, accelopt_cache, fake_evaluations
):
    with Store.open(tmp_path / "ws") as store:
        _stale_start(store, hw, variant("slow"))
        run = new_run(store, RunTarget("matmul", "small", "cpu", hw), ONE, llm, variant("slow"))
        result = execute_run(store, run, RunInputs(llm, hw, FAST_EVAL, check_llm=False), False)
        best = variant_of(result.best.kernel.source)
        assert best != "slow", "the scripted search found nothing faster"
        truth = LATENCY_S["slow"] / LATENCY_S[best]
        searched = result.baseline.evaluation.latency_s / result.best.evaluation.latency_s
        assert searched == pytest.approx(truth * STALE)  # the trap: the search's own figures
        summary = run_summary(result)
        assert summary.headline is not None and summary.headline.interval is not None
        assert abs(summary.speedup / truth - 1) <= summary.headline.interval
        assert summary.baseline.latency_s == pytest.approx(LATENCY_S["slow"])  # the session's
        row = views.run_row(store, store.get_run(run.id))
        assert row["speedup"] == summary.speedup and row["speedup_interval"] is not None
        assert row["baseline_latency_s"] == summary.baseline.latency_s
        assert "re-timed side by side" in headline_caption(summary)
        assert " ± " in headline_speedup(summary)  # the session's interval, beside the speedup


def test_an_autotune_run_reports_its_session_not_the_stale_cached_start(
    tmp_path, llm, hw, accelopt_cache, fake_evaluations
):
    """The Done-when case: an autotune run (no LLM) whose starting kernel's cached evaluation is
    stale and 3x slow. Its variants (fake: the same latency) confirm nothing faster, so the
    kernel as written stays and is re-timed alone: the headline is its fresh figure, 1.00x."""
    start = variant("slow") + TUNABLE
    tune = SearchConfig(strategy="autotune", iterations=1, variants=2)
    with Store.open(tmp_path / "ws") as store:
        _stale_start(store, hw, start)
        run = new_run(store, RunTarget("matmul", "small", "cpu", hw), tune, llm, start)
        result = execute_run(store, run, RunInputs(llm, hw, FAST_EVAL, check_llm=False), False)
        assert result.best.hash == result.baseline.hash
        assert result.baseline.evaluation.latency_s == pytest.approx(LATENCY_S["slow"] * STALE)
        summary = run_summary(result)
        assert summary.headline is not None and summary.speedup == 1.0
        assert summary.best.latency_s == pytest.approx(LATENCY_S["slow"])  # fresh, not stale
        row = views.run_row(store, store.get_run(run.id))
        assert row["best_latency_s"] == pytest.approx(LATENCY_S["slow"])


def test_a_closing_session_of_one_kernel_is_a_speedup_of_one():
    """A run that found nothing faster re-times its starting kernel alone: 1.00x, exactly."""
    hw_free = {"ratios": [1.0], "ratio_ci": [0.0], "rounds": 8, "measured_at": "t"}
    evaluation = _evaluation(2e-3)
    found = headline_of(stored({**hw_free, "evaluations": [evaluation]}), ["small"])
    assert found is not None and found.speedup == 1.0 and found.interval == 0.0
    assert found.best.latency_s == found.baseline.latency_s == 2e-3


def test_a_closing_session_over_two_workloads_combines_each_kernel():
    data = {"ratios": [1.0, 0.5], "ratio_ci": [0.0, 0.02], "rounds": 6, "measured_at": "t",
            "evaluations": [_evaluation(4e-3, "small"), _evaluation(2e-3, "small"),
                            _evaluation(8e-3, "cpu"), _evaluation(4e-3, "cpu")]}  # fmt: skip
    found = headline_of(stored(data), ["small", "cpu"])
    assert found is not None and found.speedup == pytest.approx(2.0)
    assert found.baseline.workload == found.best.workload == "small+cpu"
    assert FINAL < 0  # never an iteration of the loop


def _evaluation(latency: float, workload: str = "small") -> dict:
    return {
        "problem": "matmul", "workload": workload, "backend": "cpu", "kernel": "k",
        "kernel_hash": f"h{latency}", "hardware": "hw", "status": "PASSED",
        "latency_s": latency, "peak_s": 1e-3, "pct_of_peak": 1e-3 / latency, "bound": "matmul",
        "tolerance": 1e-3,
    }  # fmt: skip


def test_a_session_without_a_figure_for_each_kernel_gives_no_headline():
    """A closing session whose worker failed part-way: no headline (the run then reports the
    search's own figures and says so), never a crash at the run's end."""
    data = {"ratios": [1.0, None], "ratio_ci": [0.0, None], "rounds": 0, "measured_at": "t",
            "evaluations": [_evaluation(4e-3, "small"), _evaluation(2e-3, "small"),
                            _evaluation(8e-3, "cpu")]}  # fmt: skip
    assert headline_of(stored(data), ["small", "cpu"]) is None
    assert headline_of(stored({**data, "evaluations": []}), ["small"]) is None


def stored(data: dict) -> RetimingRecord:
    """A closing session as the store keeps it (its kernels: one per ratio)."""
    return RetimingRecord.from_stored([f"k{i}" for i in range(len(data["ratios"]))], data)
