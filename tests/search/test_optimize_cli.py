"""`accelopt optimize`, `runs` and `memory` as a user runs them, and a run killed with SIGKILL
that resumes without paying or measuring anything twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from agents_pool import AgentPool, write_config
from cli_timing import NO_REFERENCES, QUICK_TIMING
from exported_calls import call_export

from accelopt.search.evaluations import run_evaluations
from accelopt.store.store import Store
from accelopt.testing.scripted import ScriptedServer

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow, pytest.mark.alone]  # speedups

SEARCH = ("--beam", "2", "--plans", "2", "--samples", "1", "--workload", "small", *QUICK_TIMING,
          *NO_REFERENCES)  # fmt: skip


def optimize_args(config, workspace, start, *extra):
    return ("optimize", "matmul", *SEARCH, "--kernel", start, "--config", config,
            "--workspace", workspace, *extra)  # fmt: skip


def test_optimize_runs_and_memory_commands(run_cli, tmp_path, slow_start):
    with ScriptedServer(default=AgentPool()) as server:
        config = write_config(tmp_path / "accelopt.yaml", server.base_url)
        ws = tmp_path / "ws"
        out_file, json_file = tmp_path / "best.c", tmp_path / "summary.json"
        out = run_cli(*optimize_args(config, ws, slow_start, "--iterations", "1", "--out",
                                     out_file, "--json", json_file))  # fmt: skip
        assert out.returncode == 0, out.stderr
        summary = json.loads(json_file.read_text())  # the JSON to a file, the tables to stdout
        assert summary["status"] == "finished" and summary["speedup"] > 3
        assert out_file.read_text().strip() and "void kernel" in out_file.read_text()
        assert {"planner", "executor"} <= set(summary["usage"])
        for text in ("baseline", "best", "speedup", "LLM usage", "planner", "best kernel written"):
            assert text in out.stdout
    runs = json.loads(run_cli("runs", "list", "--workspace", ws, "--json", "-").stdout)
    assert [r["status"] for r in runs] == ["finished"]
    run_id = summary["run"]
    shown = run_cli("runs", "show", run_id[:6], "--workspace", ws)
    assert shown.returncode == 0, shown.stderr
    assert "lineage of the best kernel" in shown.stdout and "variant good" in shown.stdout
    detail = json.loads(run_cli("runs", "show", run_id, "--workspace", ws, "--json", "-").stdout)
    assert detail["lineage"][0]["origin"] == "baseline"
    assert detail["lineage"][-1]["hash"] == summary["best"]["hash"]
    assert [i["iteration"] for i in detail["iterations"]] == [0, 1]
    lessons = json.loads(run_cli("memory", "list", "--workspace", ws, "--json", "-").stdout)
    assert lessons and {lesson["kind"] for lesson in lessons} <= {"positive", "negative"}
    one = run_cli("memory", "show", str(lessons[0]["id"]), "--workspace", ws)
    assert one.returncode == 0 and lessons[0]["lesson"]["title"] in one.stdout
    exported = tmp_path / "lessons.jsonl"
    assert run_cli("memory", "export", exported, "--workspace", ws).returncode == 0
    other = tmp_path / "other"
    imported = run_cli("memory", "import", exported, "--workspace", other)
    assert imported.returncode == 0 and f"imported {len(lessons)} lessons" in imported.stdout
    assert run_cli("runs", "show", "nosuchrun", "--workspace", ws).returncode == 2


def test_optimize_without_an_endpoint_says_how_to_configure_one(run_cli, tmp_path):
    out = run_cli("optimize", "matmul", "--workload", "small", "--workspace", tmp_path / "ws",
                  env={"ACCELOPT_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                       "ACCELOPT_LLM_MODEL": "m"})  # fmt: skip
    assert out.returncode == 2
    assert "cannot reach the LLM endpoint" in out.stderr and "accelopt.yaml" in out.stderr
    assert "Traceback" not in out.stderr
    unconfigured = run_cli("optimize", "matmul", "--workspace", tmp_path / "ws2",
                           env={"ACCELOPT_LLM_BASE_URL": "", "ACCELOPT_LLM_MODEL": ""})  # fmt: skip
    assert unconfigured.returncode == 2 and "no LLM base_url" in unconfigured.stderr


def test_a_killed_run_resumes_without_paying_or_measuring_twice(cli_env, tmp_path, slow_start):
    # iteration 1 makes 2 plans (one parent, --plans 2): the hang is in iteration 2, after a paid
    # planner call of its own
    pool = AgentPool(plan_order=("good", "slower"), pause_after_plans=2)
    with ScriptedServer(default=pool) as server:
        config = write_config(tmp_path / "accelopt.yaml", server.base_url)
        ws = tmp_path / "ws"
        args = optimize_args(config, ws, slow_start, "--iterations", "3", "--json", "-")
        command = [sys.executable, "-m", "accelopt", *map(str, args)]
        proc = subprocess.Popen(
            command, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert pool.paused.wait(timeout=300), "the run never reached iteration 2"
        time.sleep(1.0)  # let in-flight evaluations land
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed_requests = len(server.requests)
        with Store.open(ws) as store:
            (run,) = store.list_runs()
            assert run.status == "running"  # killed: nobody marked it
            calls_before = len(store.llm_calls(run.id))
            paid_before = {c.key for c in store.llm_calls(run.id) if c.ok}
            measured_before = {h: e.seeds for h, e in run_evaluations(store, run.id).items()}
            assert [i.iteration for i in store.iterations(run.id)] == [0, 1]
        resumed = subprocess.run(
            [sys.executable, "-m", "accelopt", "optimize", "--resume", run.id, "--config",
             str(config), "--workspace", str(ws), "--json", "-"],
            env=cli_env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        resumed_requests = len(server.requests) - killed_requests
    summary = json.loads(resumed.stdout)
    assert summary["status"] == "finished" and summary["run"] == run.id
    with Store.open(ws) as store:
        calls = store.llm_calls(run.id)
        second = calls[calls_before:]
        replayed = [c for c in second if c.replayed]
        fresh = [c for c in second if not c.replayed]
        assert replayed, "the resumed run replayed nothing"
        assert not {c.key for c in fresh} & paid_before  # nothing paid twice
        assert resumed_requests == len(fresh)  # every HTTP request is a new, unpaid call
        after = run_evaluations(store, run.id)
        for kernel_hash, seeds in measured_before.items():
            assert after[kernel_hash].seeds == seeds  # nothing measured twice
        assert [i.iteration for i in store.iterations(run.id)] == [0, 1, 2, 3]
        assert store.get_run(run.id).status == "finished"
    assert os.path.exists(summary["best_kernel_path"])


def test_several_problems_share_memory_and_end_with_a_results_table(run_cli, tmp_path):
    with ScriptedServer(default=AgentPool()) as server:
        config = write_config(tmp_path / "accelopt.yaml", server.base_url)
        args = ("optimize", "matmul", "silu", "--workload", "small", "--beam", "1", "--plans",
                "1", "--samples", "1", "--iterations", "1", "--config", config,
                "--workspace", tmp_path / "ws", *QUICK_TIMING, *NO_REFERENCES)  # fmt: skip
        out = run_cli(*args)
        assert out.returncode == 0, out.stderr
        assert "suite results" in out.stdout and "geomean / total" in out.stdout
        data = json.loads(run_cli(*args, "--json", "-").stdout)
    assert [d["problem"] for d in data] == ["matmul", "silu"]
    assert all(d["status"] == "finished" for d in data)
    assert not [d for d in data if "best_reference" in d]  # --no-references: none was timed


def test_autotune_needs_no_endpoint_and_shows_its_variants(run_cli, tmp_path):
    ws, unset = tmp_path / "ws", {"ACCELOPT_LLM_BASE_URL": "", "ACCELOPT_LLM_MODEL": ""}
    out = run_cli("optimize", "matmul", "--strategy", "autotune", "--kernel", "expert",
                  "--iterations", "1", "--variants", "2", "--workload", "small", *QUICK_TIMING,
                  "--workspace", ws, "--export", tmp_path / "best", env=unset)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"exported to {tmp_path / 'best'}" in out.stdout
    call_export(tmp_path / "best", (64, 192, 80))  # the run's best, from a fresh interpreter
    for text in ("variants of kernel", "(as written)", "KCMAX=", "re-timed", "best kernel written"):
        assert text in out.stdout
    # the verdict says what a re-timing side by side confirmed
    verdict = " ".join(out.stdout.split())
    assert (
        "no variant confirmed faster" in verdict
        or "faster than the kernel as written (re-timed" in verdict
    )
    assert "LLM usage" not in out.stdout  # nothing was asked of a model
    run = json.loads(run_cli("runs", "list", "--workspace", ws, "--json", "-").stdout)[0]
    assert run["strategy"] == "autotune" and run["cost_usd"] == 0
    # the references the run timed in its session: the best kernel's speedup over the fastest
    reference = run["best_reference"]
    assert reference["kind"] in ("numpy", "torch", "inductor", "max-autotune")
    assert run["speedup_over_reference"] == reference["latency_s"] / run["best_latency_s"]
    assert f"best reference: {reference['kind']}" in out.stdout
    compared = run_cli("runs", "compare", run["run"], "--workspace", ws, "--json", "-")
    assert json.loads(compared.stdout)[0]["reference"]["kind"] == reference["kind"]
    shown = json.loads(run_cli("runs", "show", run["run"], "--workspace", ws, "--json", "-").stdout)
    assert len(shown["variants"][0]["rows"]) == 3  # the expert as written and its 2 variants
    again = run_cli("export", "matmul", "--run", run["run"], "--to", tmp_path / "again",
                    "--workspace", ws)  # fmt: skip
    assert again.returncode == 0, again.stderr
    for folder in (tmp_path / "best", tmp_path / "again"):  # the run's own evaluation, reused
        evidence = json.loads((folder / "EVIDENCE.json").read_text())
        assert evidence["run"] == run["run"]
        assert evidence["workloads"]["small"]["latency_s"] == run["best_latency_s"]
    report = run_cli("report", run["run"], "--workspace", ws)
    assert report.returncode == 0, report.stderr
    page = next((ws / "reports").glob("*.html")).read_text()
    assert "Tuned variants" in page and "<th>KCMAX</th>" in page  # a column per tunable
    assert f"best reference: {reference['kind']}" in page and "vs best reference" in page
    untunable = run_cli("optimize", "matmul", "--strategy", "autotune", "--workload", "small",
                        "--workspace", ws, env=unset)  # fmt: skip
    assert untunable.returncode == 2 and "Traceback" not in untunable.stderr
    assert "declares no tunables" in untunable.stderr
    assert "matmul --kernel expert" in untunable.stderr
