"""A run recorded by `accelopt mcp` (an agent session) is not a search: resuming it says so."""

from __future__ import annotations

from accelopt.store.records import RunRecord
from accelopt.store.store import Store


def test_resuming_an_agent_session_is_refused_in_one_sentence(run_cli, tmp_path):
    ws = tmp_path / "ws"
    with Store.open(ws) as store:
        store.create_run(RunRecord("agentrun0001", "silu", "small", "cpu", "cpu:test-x",
                                   "agent", spec={"agent": {"pid": 1}}))  # fmt: skip
    out = run_cli("optimize", "--resume", "agentrun0001", "--workspace", ws,
                  env={"ACCELOPT_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                       "ACCELOPT_LLM_MODEL": "m"})  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "agent session" in out.stderr and "--kernel FILE" in out.stderr
    assert "Traceback" not in out.stderr
