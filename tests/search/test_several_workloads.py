"""A run tuned on several workloads: each kernel is measured on every one and scored by the
geometric mean; a kernel correct on one shape only fails, naming the other; the agents are shown
every tuned workload's sizes."""

from __future__ import annotations

import pytest
from agents_pool import AgentPool, variant, write_config

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.llm.config import load_config
from accelopt.problems import load_problem
from accelopt.search.config import SearchConfig
from accelopt.search.evaluations import run_evaluations
from accelopt.search.run import RunInputs, RunTarget, execute_run, new_run
from accelopt.search.workloads import choose_workloads, generalization
from accelopt.store.store import Store
from accelopt.testing.scripted import ScriptedServer
from conftest import FAST_EVAL

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def test_a_kernel_tuned_to_one_shape_fails_and_the_best_passes_on_all(
    tmp_path, hw, accelopt_cache, busy
):
    """Beside two spinners per CPU and a memory hog (``busy``): the speedups hold."""
    matmul = load_problem("matmul")
    chosen = choose_workloads(matmul, ["small", "tiny"])
    search = SearchConfig(beam=1, plans=2, samples=1, iterations=1, fixer=1, references=False)
    sizes = {w: matmul.workload(w).sizes for w in chosen.all}
    with ScriptedServer(default=AgentPool(plan_order=("sized", "good"))) as server:
        llm = load_config(write_config(tmp_path / "accelopt.yaml", server.base_url))
        with Store.open(tmp_path / "ws") as store:
            target = RunTarget("matmul", "small", "cpu", hw, workloads=chosen, sizes=sizes)
            run = new_run(store, target, search, llm, variant("slow"))
            result = execute_run(store, run, RunInputs(llm, hw, FAST_EVAL), resume=False)
            evaluations = run_evaluations(store, run.id)
            on_tiny = run_evaluations(store, run.id, workload="tiny")
            table = generalization(store, store.get_run(run.id))
        requests = list(server.requests)
    sized = evaluations[Kernel(variant("sized")).hash]
    assert sized.status is Status.INCORRECT and sized.error.startswith("on workload tiny")
    best = result.best  # the good variant, or the fixer's repair of the sized one
    assert best.hash != Kernel(variant("sized")).hash and best.hash != Kernel(variant("slow")).hash
    assert best.evaluation.passed and best.evaluation.workload == "small+tiny"
    assert on_tiny[best.hash].passed and on_tiny[best.hash].workload == "tiny"
    assert [r.workload for r in table.rows] == ["small", "tiny"]
    assert all(r.speedup and r.speedup > 1 for r in table.rows)
    planner = [r.messages[-1]["content"] for r in requests if r.model == "planner"]
    assert all("Also compiled and scored for: M=72, N=100, K=40" in p for p in planner)
    fixer = [r.messages[-1]["content"] for r in requests if r.model == "fixer"]
    assert any("on workload tiny" in p for p in fixer)
