"""A run's settings are typed: what ``new_run`` records reads back by attribute, runs recorded by
older versions read with the defaults that mean what they did, and a misspelt key is refused."""

import pydantic
import pytest

from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.config import AgentLLM, BudgetConfig, Config, LLMSection
from accelopt.search.config import SearchConfig
from accelopt.search.run import RunTarget, new_run
from accelopt.search.spec import AgentSession, RunSpec
from accelopt.search.workloads import RunWorkloads
from accelopt.store.records import RunRecord
from accelopt.store.store import Store

HW = HardwareSpec(name="test-cpu", backend="cpu", cores=2, matmul_rate=1e11, vector_rate=5e10,
                  bandwidth=2e10)  # fmt: skip


def test_new_run_records_a_spec_that_reads_back_by_attribute(tmp_path):
    default = AgentLLM(base_url="http://127.0.0.1:9/v1", model="m")
    llm = Config(llm=LLMSection(default=default), budget=BudgetConfig(max_usd=2.0))
    with Store.open(tmp_path / "ws") as store:
        target = RunTarget("matmul", "small", "cpu", HW, version="v1",
                           workloads=RunWorkloads(("small", "cpu"), ("tiny",)),
                           sizes={"small": {"M": 8}})  # fmt: skip
        run = new_run(
            store, target, SearchConfig(iterations=3), llm, start_source="void f(void) {}"
        )
        stored = store.get_run(run.id)
    assert stored is not None and stored.spec == run.spec
    spec = RunSpec.of(stored)
    assert spec.search == SearchConfig(iterations=3)
    assert spec.budget == BudgetConfig(max_usd=2.0)
    assert spec.hardware_spec == HW and spec.problem_version == "v1"
    assert spec.tuned(stored) == ("small", "cpu") and spec.held_out == ("tiny",)
    assert spec.workload_sizes == {"small": {"M": 8}, "cpu": {}, "tiny": {}}
    assert spec.start_source == "void f(void) {}" and spec.models["planner"] == "m"


def test_a_run_on_one_workload_tunes_on_its_own():
    run = RunRecord("r", "matmul", "small", "cpu", "hw", "beam", spec={"search": {}})
    spec = RunSpec.of(run)
    assert spec.tuned(run) == ("small",) and spec.held_out == ()


def test_an_older_run_reads_with_the_defaults_of_its_time():
    """A run recorded before budgets, workloads, replay and fingerprints were."""
    old = RunRecord("r", "silu", "small", "cpu", "hw", "beam",
                    spec={"search": {"beam": 2}, "models": {"planner": "m"}})  # fmt: skip
    spec = RunSpec.of(old)
    assert spec.search is not None and spec.search.beam == 2
    assert spec.budget is None and spec.hardware_spec is None and spec.replay_from == ()
    assert spec.parameters()["beam"] == 2


def test_an_mcp_session_has_no_search():
    spec = RunSpec(agent=AgentSession(session="s1", pid=7), hardware_spec=HW)
    run = RunRecord("r", "silu", "small", "cpu", HW.key(), "agent", spec=spec.to_json())
    again = RunSpec.of(run)
    assert again.search is None and again.parameters() == {}
    assert again.agent == AgentSession(session="s1", pid=7)


def test_a_misspelt_setting_is_refused():
    with pytest.raises(pydantic.ValidationError, match="replay_form"):
        RunSpec.model_validate({"replay_form": ["r1"]})
