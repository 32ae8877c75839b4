"""`accelopt problem import flashinfer` and `problem export flashinfer` as a user runs them: a
dataset's float32 definitions become problems with a workload per uuid, a kernel is evaluated on
one of them, a run optimizes one, and the run's best kernel is exported as a solution with a trace
per workload it was measured on; the export imports back as the same problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from cli_timing import NO_REFERENCES, QUICK_TIMING

from accelopt.problems.flashinfer import schema as fi
from accelopt.testing.scripted import RecordedRequest, Reply, ScriptedServer

DATASET = Path(__file__).parents[1] / "problems" / "flashinfer_dataset"
WORKLOAD_64 = "a1b2c3d4-0000-4000-8000-000000000064"
WORKLOAD_24 = "a1b2c3d4-0000-4000-8000-000000000024"
WORKLOAD_9 = "a1b2c3d4-0000-4000-8000-000000000009"  # held out
RMS_7, RMS_16 = "5b0e2c1a-1111-4c3e-9a51-000000000007", "5b0e2c1a-1111-4c3e-9a51-000000000016"
pytestmark = pytest.mark.slow

GEMM = """void kernel(const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++) acc += A[i * K + k] * B[j * K + k];
            C[i * N + j] = acc;
        }
}
"""


RMSNORM = """#include <math.h>
void kernel(const float *input, const float *weight, float *output) {
    for (int b = 0; b < batch_size; b++) {
        const float *x = input + b * hidden_size;
        double sum = 0;
        for (int h = 0; h < hidden_size; h++) sum += (double)x[h] * x[h];
        float scale = 1.0f / sqrtf((float)(sum / hidden_size) + 1e-6f);
        float *y = output + b * hidden_size;
        for (int h = 0; h < hidden_size; h++) y[h] = x[h] * scale * weight[h];
    }
}
"""


def team(request: RecordedRequest) -> Reply:
    """Every agent answers at once: the executor writes the plain kernel of the problem."""
    rmsnorm = "# Problem: rmsnorm_h64" in request.messages[-1]["content"]
    code = f"```c\n{RMSNORM if rmsnorm else GEMM}```\n"
    replies = {
        "planner": "TITLE: keep it\nSTEPS:\n1. Keep the loops.\n",
        "executor": code,
        "fixer": code,
        "summarizer": "TITLE: none\nLESSON: none.\n",
    }
    return Reply(replies[request.model])


def optimize(run_cli, config, ws, problem, *workloads):
    return run_cli(
        "optimize",
        problem,
        *workloads,
        *QUICK_TIMING,
        *NO_REFERENCES,
        "--beam",
        "1",
        "--plans",
        "1",
        "--samples",
        "1",
        "--iterations",
        "1",
        "--config",
        config,
        "--workspace",
        ws,
        "--json",
        "-",
    )


def write_config(path: Path, base_url: str) -> Path:
    agents = "".join(
        f"  {a}: {{model: {a}}}\n" for a in ("planner", "executor", "fixer", "summarizer")
    )
    path.write_text(
        f"llm:\n  default: {{base_url: '{base_url}', model: m, max_retries: 0}}\n{agents}"
    )
    return path


def test_import_optimize_export_and_import_again(run_cli, tmp_path):
    ws = tmp_path / "ws"
    out = run_cli("problem", "import", "flashinfer", DATASET, "--workspace", ws, "--json", "-")
    assert out.returncode == 0, out.stderr
    rows = {r["file"]: r for r in json.loads(out.stdout)}
    assert {n for n, r in rows.items() if r["status"] == "imported"} == {
        "gemm_n48_k32",
        "rmsnorm_h64",
    }
    assert "bfloat16" in rows["rmsnorm_bf16_h64"]["reason"]
    assert "scalar inputs the contract cannot pass yet" in rows["rmsnorm_eps_h64"]["reason"]
    assert (
        WORKLOAD_64 in rows["gemm_n48_k32"]["workloads"]
        and "cpu" in rows["gemm_n48_k32"]["workloads"]
    )
    kernel = tmp_path / "gemm.c"
    kernel.write_text(GEMM)
    evaluated = run_cli("eval", "gemm_n48_k32", kernel, "--workload", WORKLOAD_64, "--workspace",
                        ws, "--min-calls", "5", "--min-time", "0.01", "--json", "-")  # fmt: skip
    assert json.loads(evaluated.stdout)["status"] == "PASSED", evaluated.stderr
    with ScriptedServer(default=team) as server:
        config = write_config(tmp_path / "accelopt.yaml", server.base_url)
        optimized = optimize(run_cli, config, ws, "gemm_n48_k32", "--workload", WORKLOAD_64,
                             "--workload", WORKLOAD_24, "--held-out", WORKLOAD_9)  # fmt: skip
        rms = optimize(run_cli, config, ws, "rmsnorm_h64", "--workload", RMS_16, "--held-out",
                       RMS_7)  # fmt: skip
        prompts = [r.messages[-1]["content"] for r in server.requests]
    assert optimized.returncode == 0, optimized.stderr
    summary = json.loads(optimized.stdout)
    run = summary["run"]
    table = {w["workload"]: w for w in summary["generalization"]["workloads"]}
    assert [table[w]["role"] for w in (WORKLOAD_64, WORKLOAD_24, WORKLOAD_9)] == [
        "tuned", "tuned", "held out",
    ]  # fmt: skip
    assert all(w["best_pct"] and w["baseline_pct"] for w in table.values())
    assert table[WORKLOAD_9]["sizes"] == {"M": 9, "N": 48, "K": 32}
    assert {g["role"] for g in summary["generalization"]["geomeans"]} == {"tuned", "held out"}
    # the agents saw both tuned workloads' sizes and never the held-out one's
    assert any("Also compiled and scored for: M=24" in p for p in prompts)
    assert not any("M=9," in p for p in prompts)
    assert rms.returncode == 0, rms.stderr
    rms_table = json.loads(rms.stdout)["generalization"]["workloads"]
    assert [(w["workload"], w["role"]) for w in rms_table] == [
        (RMS_16, "tuned"), (RMS_7, "held out"),
    ]  # fmt: skip
    assert all(w["speedup"] for w in rms_table)
    shown = run_cli("runs", "show", run, "--workspace", ws)
    assert "generalization" in shown.stdout and "held out" in shown.stdout, shown.stderr
    page = tmp_path / "report.html"
    assert run_cli("report", run, "--out", page, "--workspace", ws).returncode == 0
    assert "<h2>Generalization</h2>" in page.read_text() and WORKLOAD_9 in page.read_text()
    exported = tmp_path / "export"
    done = run_cli("problem", "export", "flashinfer", "gemm_n48_k32", exported, "--run", run,
                   "--workspace", ws)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "(3 traces)" in done.stdout
    (solution,) = exported.glob("solutions/**/*.json")
    spec = json.loads(solution.read_text())["spec"]
    assert spec["language"] == "cpp" and spec["destination_passing_style"] is True
    (traces,) = exported.glob("traces/**/*.jsonl")
    found = [json.loads(line) for line in traces.read_text().splitlines()]
    assert {t["workload"]["uuid"] for t in found} == {WORKLOAD_64, WORKLOAD_24, WORKLOAD_9}
    assert all(t["evaluation"]["status"] == "PASSED" for t in found)
    assert all(t["evaluation"]["performance"]["latency_ms"] > 0 for t in found)
    for line in traces.read_text().splitlines():  # valid under the documented schema
        parsed = fi.Trace.model_validate_json(line)
        assert parsed.evaluation is not None and parsed.evaluation.status == "PASSED"
    fi.Solution.model_validate_json(solution.read_text())
    definition = DATASET / "definitions" / "gemm" / "gemm_n48_k32.json"
    (written,) = exported.glob("definitions/**/gemm_n48_k32.json")
    assert written.read_bytes() == definition.read_bytes()
    again = run_cli("problem", "import", "flashinfer", exported, "--workspace", tmp_path / "ws2",
                    "--json", "-")  # fmt: skip
    (back,) = json.loads(again.stdout)
    assert back["status"] == "imported" and back["signature"] == rows["gemm_n48_k32"]["signature"]
    assert back["workloads"] == rows["gemm_n48_k32"]["workloads"]
    bad_run = run_cli("problem", "export", "flashinfer", "rmsnorm_h64", tmp_path / "x", "--run",
                      run, "--workspace", ws)  # fmt: skip
    assert bad_run.returncode == 2 and "no run" in bad_run.stderr
