"""A new search strategy is one class and one enum value: "random restarts", defined here, starts
every iteration again from the run's first kernel. It is registered with one entry in
``strategies.STRATEGIES`` (its name a value of this module's enum), and then runs as any shipped
strategy does: ``SearchConfig`` accepts its name, ``new_run`` records it, ``execute_run`` runs it
with the scripted agents and the fake runner (fixed latencies per variant)."""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum

import pytest
from agents_pool import variant

from accelopt.search.config import SearchConfig
from accelopt.search.run import RunInputs, RunTarget, execute_run, new_run
from accelopt.search.selection import Candidate
from accelopt.search.strategies import STRATEGIES
from accelopt.search.strategies.base import Frontier, Planned
from accelopt.store.records import KernelOrigin, RunRecord
from accelopt.store.store import Store
from conftest import FAST_EVAL

pytestmark = [pytest.mark.timeout(300)]


class Extra(StrEnum):
    RANDOM_RESTARTS = "random-restarts"


class RandomRestarts(Planned):
    """Each iteration from the run's first kernel again: its N plans, written by the agents."""

    def parents(self, at: Frontier, width: int) -> list[Candidate]:
        return [at.baseline]


@pytest.fixture()
def restarts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(STRATEGIES, Extra.RANDOM_RESTARTS, RandomRestarts)
    yield


def search(strategy: str) -> SearchConfig:
    return SearchConfig(strategy=strategy, beam=2, plans=2, samples=1, iterations=3, fixer=0,
                        memory="off", references=False)  # fmt: skip


def written_from(store: Store, llm, hw, strategy: str) -> tuple[RunRecord, set[str], int]:
    """A run of ``strategy``: its record, the parents of the kernels the agents wrote in
    iterations 2 and 3 (after the first), and how many iterations it committed."""
    run = new_run(store, RunTarget("matmul", "small", "cpu", hw), search(strategy), llm,
                  variant("slow"))  # fmt: skip
    result = execute_run(store, run, RunInputs(llm, hw, FAST_EVAL), resume=False)
    assert result.status == "finished"
    assert result.best.latency is not None and result.baseline.latency is not None
    assert result.best.latency < result.baseline.latency  # the restarts found faster kernels
    written = store.kernels(run.id, every_write=True)
    later = {k.parent_hash for k in written if k.iteration >= 2
             and k.origin == KernelOrigin.EXECUTOR}  # fmt: skip
    return result.run, later, len(store.iterations(run.id))


def test_a_strategy_defined_in_a_test_restarts_from_the_baseline_each_iteration(
    tmp_path, llm, hw, server, accelopt_cache, fake_evaluations, restarts
):
    with Store.open(tmp_path / "ws") as store:
        run, parents, committed = written_from(store, llm, hw, Extra.RANDOM_RESTARTS)
        assert run.strategy == "random-restarts"  # recorded by name, a plain string
        assert committed == 4  # the baseline's iteration 0, then 1..3
        assert parents == {run.baseline_hash}  # every iteration from the first kernel
        planner = [r for r in server.requests if r.model == "planner"]
        assert len(planner) == 3 * 2  # one parent an iteration, its N plans
        # beam search, on the same fakes, goes on from what it kept: the restarts are the
        # strategy's doing, not the fakes'
        beam, beam_parents, _ = written_from(store, llm, hw, "beam")
        assert beam_parents - {beam.baseline_hash}


def test_a_strategy_name_nobody_registered_is_refused():
    with pytest.raises(ValueError, match="no strategy 'random-restarts': one of beam, sampling"):
        SearchConfig(strategy=Extra.RANDOM_RESTARTS)
