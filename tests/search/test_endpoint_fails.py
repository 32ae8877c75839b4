"""`accelopt optimize` against an endpoint that answers 500 to everything: the run stops at the
first iteration whose every call failed, with one sentence naming the agent, the endpoint and
the error it sent, exit code 3, status failed, $0 spent (known); and it resumes once the endpoint
answers, from what it had measured."""

from __future__ import annotations

import json

import pytest
from agents_pool import AgentPool, write_config
from cli_timing import NO_REFERENCES, QUICK_TIMING

from accelopt.cli.optimize import ENDPOINT_FAILED_EXIT
from accelopt.search.evaluations import run_evaluations
from accelopt.store.store import Store
from accelopt.testing.scripted import RecordedRequest, Reply, ScriptedServer

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]  # two runs of one iteration: ~12 s

SEARCH = ("--beam", "1", "--plans", "1", "--samples", "1", "--workload", "small", *QUICK_TIMING,
          *NO_REFERENCES)  # fmt: skip
DOWN = "the model is overloaded, try again later"


class Flaky:
    """500 with DOWN to every request until ``up`` is set; then the agents' pool answers."""

    def __init__(self) -> None:
        self.up = False
        self.pool = AgentPool()

    def __call__(self, request: RecordedRequest) -> Reply:
        return self.pool(request) if self.up else Reply(status=500, content=DOWN)


def test_a_dead_endpoint_stops_the_run_failed_and_it_resumes(run_cli, tmp_path, slow_start):
    flaky = Flaky()
    with ScriptedServer(default=flaky) as server:
        config = write_config(tmp_path / "accelopt.yaml", server.base_url)
        ws, summary_file = tmp_path / "ws", tmp_path / "summary.json"
        out = run_cli("optimize", "matmul", *SEARCH, "--kernel", slow_start, "--config", config,
                      "--workspace", ws, "--iterations", "1", "--json", summary_file)  # fmt: skip
        assert out.returncode == ENDPOINT_FAILED_EXIT == 3, out.stderr
        err = " ".join(out.stderr.split())  # the sentence, wrapped to the terminal's width
        said = err[err.index("error: the LLM endpoint failed: every call of iteration 1") :]
        for words in ("planner", server.base_url, "Error code: 500", DOWN):
            assert words in said, words
        assert "Traceback" not in out.stderr
        summary = json.loads(summary_file.read_text())
        assert summary["status"] == "failed" and "iteration 1" in summary["stopped"]
        planner = summary["usage"]["planner"]
        assert planner["failed"] == planner["calls"] == 1 and planner["cost_usd"] == 0.0
        assert planner["unknown_cost"] == 0  # $0, known
        assert "unknown" not in out.stdout and "0.0000" in out.stdout
        run_id = summary["run"]
        assert said.endswith(f"resume it with `accelopt optimize --resume {run_id}`")  # the last
        with Store.open(ws) as store:
            (run,) = store.list_runs()
            assert run.status == "failed" and [i.iteration for i in store.iterations(run_id)] == [0]
            assert run.baseline_hash in run_evaluations(store, run_id)  # what it measured stays
        flaky.up = True
        resumed = run_cli("optimize", "--resume", run_id, "--config", config, "--workspace", ws,
                          "--json", "-")  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
    again = json.loads(resumed.stdout)
    assert again["run"] == run_id and again["status"] == "finished" and "stopped" not in again
    with Store.open(ws) as store:
        assert [i.iteration for i in store.iterations(run_id)] == [0, 1]
