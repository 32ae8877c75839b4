"""The optimization loop end to end: scripted agents, real kernels, real measurements (the tests
of what the loop decides from its measurements, and not of the measurements, use the fake runner:
``fake_evaluations``)."""

from __future__ import annotations

import pytest
from agents_pool import AgentPool, variant

from accelopt.backends.kernel import Kernel
from accelopt.search.config import SearchConfig
from accelopt.search.run import RunInputs, RunTarget, execute_run, new_run
from accelopt.store.store import Store
from conftest import FAST_EVAL

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

SMALL = SearchConfig(beam=2, plans=2, samples=1, iterations=2, fixer=1, references=False)


def start_run(store, llm, hw, search=SMALL, problem="matmul"):
    run = new_run(store, RunTarget(problem, "small", "cpu", hw), search, llm, variant("slow"))
    return run, execute_run(store, run, RunInputs(llm, hw, FAST_EVAL), resume=False)


def test_a_run_improves_the_kernel_and_learns(tmp_path, llm, hw, server, accelopt_cache, busy):
    """Beside two spinners per CPU and a memory hog (``busy``): the faster kernel is kept and
    the slower one measured slower all the same (its clean batches: ``worker/disturbance.py``)."""
    with Store.open(tmp_path / "ws") as store:
        run, result = start_run(store, llm, hw)
        assert result.status == "finished"
        assert result.best.evaluation.passed
        assert result.best.latency < result.baseline.latency / 3  # i-k-j beats i-j-k by far
        assert result.best.hash != Kernel(variant("slow")).hash
        iterations = store.iterations(run.id)
        assert [i.iteration for i in iterations] == [0, 1, 2]
        assert iterations[-1].best_hash == result.best.hash
        origins = {k.origin for k in store.kernels(run.id)}
        assert {"baseline", "executor", "fixer"} <= origins  # broken/wrong kernels were repaired
        kinds = {e.kind for e in store.experiences(run_id=run.id)}
        assert kinds == {"positive", "negative"}
        negatives = [e for e in store.experiences(run_id=run.id) if e.kind == "negative"]
        slower = Kernel(variant("slower")).hash
        assert any(e.slow_hash == slower for e in negatives)  # stored reversed: "undo this"
        assert all(e.speedup > 1.15 for e in negatives)
        usage = store.usage(run.id)
        assert {"planner", "executor", "summarizer", "fixer"} <= set(usage)
        assert sum(u["cost_usd"] for u in usage.values()) > 0
        assert store.get_run(run.id).status == "finished"


def test_the_next_run_sees_the_lessons(tmp_path, llm, hw, server, accelopt_cache, fake_evaluations):
    with Store.open(tmp_path / "ws") as store:
        start_run(store, llm, hw)
        titles = {e.lesson.title for e in store.experiences()}
        first_run_requests = len(server.requests)
        start_run(
            store, llm, hw, SearchConfig(beam=1, plans=1, samples=1, iterations=1, references=False)
        )
    planner = [r for r in server.requests[first_run_requests:] if r.model == "planner"]
    prompt = planner[0].messages[-1]["content"]
    assert "Lessons from earlier optimizations" in prompt
    assert any(title in prompt for title in titles)


def test_memory_off_gives_no_lessons_and_writes_none(
    tmp_path, llm, hw, server, accelopt_cache, fake_evaluations
):
    with Store.open(tmp_path / "ws") as store:
        start_run(store, llm, hw)
        before = len(server.requests)
        off = SearchConfig(beam=1, plans=1, samples=1, iterations=1, memory="off", references=False)
        run, _ = start_run(store, llm, hw, off)
        assert store.experiences(run_id=run.id) == []
    later = server.requests[before:]
    assert "summarizer" not in {r.model for r in later}
    assert all("Lessons from" not in r.messages[-1]["content"] for r in later)


def test_sampling_starts_every_plan_from_the_start_kernel(
    tmp_path, llm, hw, server, accelopt_cache, fake_evaluations
):
    search = SearchConfig(
        strategy="sampling", beam=2, plans=1, samples=1, iterations=2, references=False
    )
    with Store.open(tmp_path / "ws") as store:
        run, result = start_run(store, llm, hw, search)
        start = Kernel(variant("slow")).hash
        children = [k for k in store.kernels(run.id) if k.origin == "executor"]
        assert children and all(k.parent_hash == start for k in children)
        assert result.status == "finished" and result.best.evaluation.passed
    executors = [r for r in server.requests if r.model == "executor"]
    assert len(executors) == search.executor_calls_per_iteration() * search.iterations


def test_the_budget_stops_the_run_cleanly(
    tmp_path, llm, hw, server, accelopt_cache, fake_evaluations
):
    tight = llm.model_copy(update={"budget": llm.budget.model_copy(update={"max_usd": 0.002})})
    with Store.open(tmp_path / "ws") as store:
        run = new_run(store, RunTarget("matmul", "small", "cpu", hw), SMALL, tight, variant("slow"))
        result = execute_run(store, run, RunInputs(tight, hw, FAST_EVAL), resume=False)
        assert result.status == "budget"
        assert store.get_run(run.id).status == "budget"
        assert result.best.evaluation.passed  # the best so far (at least the start kernel)
        calls = store.llm_calls(run.id)
        refused = [c for c in calls if "budget reached" in c.error]
        assert refused and all(c.tokens_in == 0 for c in refused)
    assert len(server.requests) == len(calls) - len(refused)  # refused calls sent nothing


def test_no_endpoint_stops_before_spending(tmp_path, hw, accelopt_cache):
    from accelopt.errors import UserError
    from accelopt.llm.config import Config

    nowhere = Config.model_validate({"llm": {"default": {"base_url": "http://127.0.0.1:9/v1",
                                                         "model": "m"}}})  # fmt: skip
    with Store.open(tmp_path / "ws") as store:
        run = new_run(store, RunTarget("matmul", "small", "cpu", hw), SMALL, nowhere)
        with pytest.raises(UserError, match="cannot reach the LLM endpoint"):
            execute_run(store, run, RunInputs(nowhere, hw, FAST_EVAL), resume=False)
        assert store.kernels(run.id) == []  # nothing measured
        assert store.llm_calls(run.id) == []  # nothing paid


def test_pool_fixture_sanity(pool: AgentPool):
    assert "void kernel" in variant("good")
