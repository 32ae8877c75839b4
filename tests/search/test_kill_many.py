"""One run killed with SIGKILL again and again, at five points of its iterations, and resumed
after each kill: it never asks again for an answer that had arrived, and its budget holds across
all the kills, the calls cut off in flight included (they are held in the store before they are
sent: ``Store.hold_call``). Evaluations come from fake_runner.py (no kernel is compiled), so the
sessions take a second each, and the two runs (one workload, two) go at once; the real pool's
kill and resume are test_optimize_cli.py's."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from kill_support import agents, run_id, session, write_config

from accelopt.llm.pricing import Price
from accelopt.search.spec import RunSpec
from accelopt.store.records import RunStatus
from accelopt.store.store import Store
from accelopt.testing.scripted import ScriptedServer
from accelopt.testing.scripting import usage
from accelopt.views import run_show_json

pytestmark = [pytest.mark.timeout(300)]

SEARCH = {"beam": 2, "plans": 1, "samples": 1, "iterations": 4, "fixer": 1}
KILLS = ("writing 1", "fixing 1", "learning 1", "planning 2", "evaluating 2")
BUDGET_USD = 0.005
# $ per million tokens: the budget runs out after "evaluating 2" and before the fourth iteration
# ends, whatever the kills cut off in flight (a held call counts its whole max_tokens; at 0.004 and
# three iterations, a kill that cut off two calls spent it before "evaluating 2" one run in four)
PRICE = Price(0.3, 0.6)


def charged(request) -> float:
    """What the server charged for a request it received (answered or not: a real endpoint
    bills what it processed)."""
    used = usage(request, agents(request))
    return PRICE.cost(used["prompt_tokens"], used["completion_tokens"])


WORKLOADS = ("small", "small,tiny")


@dataclass(frozen=True)
class KilledRun:
    """One run killed at every point of ``KILLS`` and resumed after each."""

    workspace: Path
    run: str
    boundaries: list[int]  # the calls recorded when each session ended
    killed: int  # the sessions a kill ended
    requests: list  # what the server received


def kill_five_times(root: Path, hw, workloads: str) -> KilledRun:
    with ScriptedServer(default=agents) as server:
        config = write_config(root / "accelopt.yaml", server.base_url, BUDGET_USD,
                              PRICE.input_per_m, PRICE.output_per_m, 200)  # fmt: skip
        hardware = root / "hardware.json"
        hardware.write_text(hw.model_dump_json())
        setup = (root, config, hardware, root / "cache")
        workspace, run, boundaries, killed = root / "ws", None, [], 0
        for n, point in enumerate((*KILLS, "")):
            phases = root / f"session-{n}.phases"
            status = session(setup, workspace, phases, resume=run, kill_at=point,
                             search=SEARCH, fake=True, workloads=workloads)  # fmt: skip
            run = run or run_id(phases)
            with Store.open(workspace) as store:
                boundaries.append(len(store.llm_calls(run)))
            if status == 0:
                break
            assert status == -signal.SIGKILL and point
            killed += 1
        return KilledRun(workspace, run, boundaries, killed, server.requests)


@pytest.fixture(scope="module")
def killed_runs(tmp_path_factory, hw) -> dict[str, KilledRun | BaseException]:
    """Both runs at once (their sessions wait on the agents' replies, not on the CPU)."""

    def attempt(workloads: str) -> KilledRun | BaseException:
        try:
            return kill_five_times(tmp_path_factory.mktemp("kill-many"), hw, workloads)
        except Exception as exc:  # told by that run's test
            return exc

    with ThreadPoolExecutor(len(WORKLOADS)) as pool:
        return dict(zip(WORKLOADS, pool.map(attempt, WORKLOADS), strict=True))


@pytest.mark.parametrize("workloads", WORKLOADS)
def test_a_run_killed_five_times_pays_each_answer_once_and_keeps_its_budget(killed_runs, workloads):
    found = killed_runs[workloads]
    if isinstance(found, BaseException):
        raise found
    workspace, run = found.workspace, found.run
    assert found.killed == len(KILLS)  # every kill landed before the budget stopped the run
    with Store.open(workspace) as store:
        recorded = store.get_run(run)
        assert recorded is not None
        assert list(RunSpec.of(recorded).tuned(recorded)) == workloads.split(",")
        calls = store.llm_calls(run)
        for boundary in found.boundaries:  # no answer that arrived before a kill was asked again
            before = {c.key for c in calls[:boundary] if c.ok and not c.replayed}
            assert [c.agent for c in calls[boundary:] if not c.replayed and c.key in before] == []
        spent = store.spent([run])
        assert store.get_run(run).status == RunStatus.BUDGET
        shown = run_show_json(store, store.get_run(run))
        assert shown["cut_off"]["calls"] == spent.held_calls  # runs show says what kills cut off
    bills = [charged(r) for r in found.requests]
    assert sum(bills) <= BUDGET_USD + max(bills)  # the budget, plus one call at most
    assert sum(bills) <= spent.usd + 1e-12  # what the store counts is never less than was billed
