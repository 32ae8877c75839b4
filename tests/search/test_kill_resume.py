"""A run killed with SIGKILL in each phase of an iteration and resumed pays for nothing twice,
learns nothing twice, stays within its budget over all its sessions, and ends where a run that
was never killed ends.

Each session is a separate process (kill_driver.py) against one scripted server. The agents answer
as a function of the prompt alone (the plan is named after the kernel it is asked about), so an
uninterrupted run and a killed-and-resumed one ask the same questions and get the same answers.
Evaluations come from fake_runner.py behind the real evaluation cache (no kernel is compiled), and
the seven phases' kills run at once, so the sessions take seconds; a run of real kernels in the
real pool is killed and resumed by test_optimize_cli.py.
"""

from __future__ import annotations

import signal
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from kill_support import agents, run_id, session, write_config

from accelopt.store.store import Store
from accelopt.testing.scripted import ScriptedServer

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

BUDGET_USD = 1.0


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(default=agents) as s:
        yield s


@pytest.fixture(scope="module")
def setup(tmp_path_factory, server, hw):
    root = tmp_path_factory.mktemp("kill")
    config = write_config(root / "accelopt.yaml", server.base_url, BUDGET_USD)
    hardware = root / "hardware.json"
    hardware.write_text(hw.model_dump_json())
    cache = root / "cache"  # shared: compiled kernels and references made once
    return root, config, hardware, cache


def calls_by_session(store: Store, run: str, boundary: int) -> tuple[list, list]:
    calls = store.llm_calls(run)
    return calls[:boundary], calls[boundary:]


@pytest.fixture(scope="module")
def uninterrupted(setup, server):
    root = setup[0]
    phases = root / "whole.phases"
    assert session(setup, root / "whole", phases, fake=True) == 0
    with Store.open(root / "whole") as store:
        run = run_id(phases)
        return {
            "iterations": store.iterations(run),
            "spent": store.spent([run]),
            "experiences": store.experiences(run_id=run),
            "calls": [c for c in store.llm_calls(run) if not c.replayed],
            "phases": phases.read_text().splitlines(),
        }


PHASES = ["planning", "writing", "evaluating", "fixing", "settling", "learning", "committing"]


@dataclass(frozen=True)
class Killed:
    """A run killed as it entered one phase of iteration 1, then resumed to its end."""

    workspace: Path
    run: str
    killed_status: int  # the first session's exit status
    boundary: int  # the calls recorded before the kill
    committed: int  # the iterations committed before the kill
    resumed_status: int


def kill_and_resume(setup: tuple, phase: str) -> Killed:
    root = setup[0]
    workspace, phases = root / f"killed-{phase}", root / f"killed-{phase}.phases"
    status = session(setup, workspace, phases, kill_at=f"{phase} 1", fake=True)
    run = run_id(phases)
    with Store.open(workspace) as store:
        boundary, committed = len(store.llm_calls(run)), len(store.iterations(run))
    resumed = session(setup, workspace, phases, resume=run, fake=True)
    return Killed(workspace, run, status, boundary, committed, resumed)


@pytest.fixture(scope="module")
def killed(setup, uninterrupted) -> dict[str, Killed | BaseException]:
    """Each phase's run, killed and resumed. The seven phases' sessions run at once: they wait on
    the agents' replies (``DELAY_S`` each), not on the CPU, and each has its own workspace."""

    def attempt(phase: str) -> Killed | BaseException:
        try:
            return kill_and_resume(setup, phase)
        except Exception as exc:  # told by that phase's test, not by all seven
            return exc

    with ThreadPoolExecutor(len(PHASES)) as pool:
        return dict(zip(PHASES, pool.map(attempt, PHASES), strict=True))


@pytest.mark.parametrize("phase", PHASES)
def test_a_run_killed_in_any_phase_resumes_without_paying_twice(uninterrupted, killed, phase):
    assert f"{phase} 1" in uninterrupted["phases"]  # the script reaches every phase
    found = killed[phase]
    if isinstance(found, BaseException):
        raise found
    assert found.killed_status == -signal.SIGKILL
    assert found.committed <= 2  # killed before iteration 2 was committed
    assert found.resumed_status == 0
    run = found.run
    with Store.open(found.workspace) as store:
        first, second = calls_by_session(store, run, found.boundary)
        paid_before = {c.key for c in first if c.ok and not c.replayed}
        repaid = [c.agent for c in second if not c.replayed and c.key in paid_before]
        assert repaid == []  # zero repeated paid requests
        experiences = store.experiences(run_id=run, pending=True)
        origins = [(e.iteration, e.parent_hash, e.plan_title) for e in experiences]
        assert len(origins) == len(set(origins)) == len(uninterrupted["experiences"])
        spent = store.spent([run])
        assert spent.usd <= BUDGET_USD
        # the same questions, each paid once (the prompts differ from the other run's only in
        # the measured figures of the profiles)
        paid = Counter(c.agent for c in store.llm_calls(run) if not c.replayed)
        assert paid == Counter(c.agent for c in uninterrupted["calls"])
        # what was recorded is what the uninterrupted run paid; the calls the kill cut off in
        # flight (held, never recorded: the server may have billed them) count on top
        recorded = spent.usd - spent.held_usd
        assert recorded == pytest.approx(uninterrupted["spent"].usd, rel=0.02)
        assert uninterrupted["spent"].held_calls == 0
        final, reference = store.iterations(run)[-1], uninterrupted["iterations"][-1]
        assert (final.iteration, final.best_hash) == (reference.iteration, reference.best_hash)
        assert final.spent_usd == pytest.approx(spent.usd)
        assert final.evaluated == reference.evaluated
