"""A run killed with SIGKILL in each phase of an iteration and resumed pays for nothing twice,
learns nothing twice, stays within its budget over all its sessions, and ends where a run that
was never killed ends.

Each session is a separate process (kill_driver.py) against one scripted server. The agents answer
as a function of the prompt alone (the plan is named after the kernel it is asked about), so an
uninterrupted run and a killed-and-resumed one ask the same questions and get the same answers.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from agents_pool import VARIANTS, variant

from accelopt.llm.scripted import RecordedRequest, Reply, ScriptedServer
from accelopt.store.store import Store

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

DRIVER = Path(__file__).parent / "kill_driver.py"
# the plan asked for, by the variant the planner is shown: from the slow start a compile error,
# which the fixer repairs into a much faster kernel; from that one a much slower one. Every
# verdict is far beyond the noise, so that two runs decide alike.
NEXT = {"slow": "broken", "fixed": "slower"}
BUDGET_USD = 1.0
DELAY_S = 0.15  # every reply takes this long: a kill lands while calls are in flight


def shown_variant(prompt: str) -> str:
    """Which variant's source is the "current kernel" of a planner prompt."""
    current = prompt.split("# Current kernel", 1)[1]
    for path in sorted(VARIANTS.glob("matmul_*.c")):
        first = path.read_text().splitlines()[0]
        if first in current.split("# Its profile")[0]:
            return path.stem.removeprefix("matmul_")
    raise AssertionError("the planner was shown no known variant")


def agents(request: RecordedRequest) -> Reply:
    prompt = request.messages[-1]["content"]
    if request.model == "planner":
        name = NEXT.get(shown_variant(prompt), "good")
        plan = f"TITLE: variant {name}\nSTEPS:\n1. Rewrite as variant {name}.\n"
        return Reply(plan, delay_s=DELAY_S)
    if request.model == "executor":
        name = re.search(r"Plan to carry out: variant (\w+)", prompt).group(1)  # type: ignore[union-attr]
        return Reply(f"```c\n{variant(name)}```\n", delay_s=DELAY_S)
    if request.model == "fixer":
        return Reply(f"```c\n{variant('fixed')}```\n", delay_s=DELAY_S)
    speedup = re.search(r"measured ([\d.]+)x", prompt).group(1)  # type: ignore[union-attr]
    return Reply(f"TITLE: loop order {speedup}\nLESSON: i-k-j streams rows.\n", delay_s=DELAY_S)


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(default=agents) as s:
        yield s


@pytest.fixture(scope="module")
def setup(tmp_path_factory, server, hw):
    root = tmp_path_factory.mktemp("kill")
    config = root / "accelopt.yaml"
    models = "".join(
        f"  {a}: {{model: {a}}}\n" for a in ("planner", "executor", "fixer", "summarizer")
    )
    config.write_text(
        f"budget: {{max_usd: {BUDGET_USD}}}\nllm:\n"
        f"  default: {{base_url: '{server.base_url}', model: m, max_retries: 0,"
        " price_in: 1.0, price_out: 2.0}\n" + models
    )
    hardware = root / "hardware.json"
    hardware.write_text(hw.model_dump_json())
    cache = root / "cache"  # shared: compiled kernels and references made once
    return root, config, hardware, cache


def session(setup, workspace: Path, phases: Path, resume: str | None = None, kill_at: str = ""):
    """One driver process; with ``kill_at`` ("learning 1"), SIGKILLed when it enters that phase.
    Returns its exit status."""
    _root, config, hardware, cache = setup
    env = {**os.environ, "ACCELOPT_CACHE_DIR": str(cache)}
    argv = [sys.executable, str(DRIVER), str(workspace), str(config), str(hardware), str(phases)]
    argv += ["--resume", resume] if resume else []
    proc = subprocess.Popen(argv, env=env, start_new_session=True)
    try:
        while kill_at and proc.poll() is None:
            if phases.exists() and kill_at in phases.read_text().splitlines():
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.01)
        return proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def run_id(phases: Path) -> str:
    return next(
        line.split()[1] for line in phases.read_text().splitlines() if line.startswith("run ")
    )


def calls_by_session(store: Store, run: str, boundary: int) -> tuple[list, list]:
    calls = store.llm_calls(run)
    return calls[:boundary], calls[boundary:]


@pytest.fixture(scope="module")
def uninterrupted(setup, server):
    root = setup[0]
    phases = root / "whole.phases"
    assert session(setup, root / "whole", phases) == 0
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


@pytest.mark.parametrize("phase", PHASES)
def test_a_run_killed_in_any_phase_resumes_without_paying_twice(setup, uninterrupted, phase):
    assert f"{phase} 1" in uninterrupted["phases"]  # the script reaches every phase
    root = setup[0]
    workspace, phases = root / f"killed-{phase}", root / f"killed-{phase}.phases"
    status = session(setup, workspace, phases, kill_at=f"{phase} 1")
    assert status == -signal.SIGKILL
    run = run_id(phases)
    with Store.open(workspace) as store:
        boundary = len(store.llm_calls(run))
        assert len(store.iterations(run)) <= 2  # killed before iteration 2 was committed
    assert session(setup, workspace, phases, resume=run) == 0
    with Store.open(workspace) as store:
        first, second = calls_by_session(store, run, boundary)
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
        assert spent.usd == pytest.approx(uninterrupted["spent"].usd, rel=0.02)
        final, reference = store.iterations(run)[-1], uninterrupted["iterations"][-1]
        assert (final.iteration, final.best_hash) == (reference.iteration, reference.best_hash)
        assert final.spent_usd == pytest.approx(spent.usd)
        assert final.evaluated == reference.evaluated
