"""`accelopt problem import flashinfer` and `problem export flashinfer` as a user runs them: a
dataset's float32 definitions become problems with a workload per uuid, a kernel is evaluated on
one of them, a run optimizes one, and the run's best kernel is exported as a solution with a trace
per workload it was measured on; the export imports back as the same problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from accelopt.llm.scripted import RecordedRequest, Reply, ScriptedServer

DATASET = Path(__file__).parents[1] / "problems" / "flashinfer_dataset"
WORKLOAD_64 = "a1b2c3d4-0000-4000-8000-000000000064"
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


def team(request: RecordedRequest) -> Reply:
    """Every agent answers at once: the executor writes the plain gemm."""
    replies = {
        "planner": "TITLE: keep it\nSTEPS:\n1. Keep the loops.\n",
        "executor": f"```c\n{GEMM}```\n",
        "fixer": f"```c\n{GEMM}```\n",
        "summarizer": "TITLE: none\nLESSON: none.\n",
    }
    return Reply(replies[request.model])


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
        optimized = run_cli("optimize", "gemm_n48_k32", "--workload", WORKLOAD_64, "--beam", "1",
                            "--plans", "1", "--samples", "1", "--iterations", "1", "--config",
                            config, "--workspace", ws, "--json", "-")  # fmt: skip
    assert optimized.returncode == 0, optimized.stderr
    run = json.loads(optimized.stdout)["run"]
    exported = tmp_path / "export"
    done = run_cli("problem", "export", "flashinfer", "gemm_n48_k32", exported, "--run", run,
                   "--workspace", ws)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "(1 traces)" in done.stdout
    (solution,) = exported.glob("solutions/**/*.json")
    spec = json.loads(solution.read_text())["spec"]
    assert spec["language"] == "cpp" and spec["destination_passing_style"] is True
    (traces,) = exported.glob("traces/**/*.jsonl")
    (trace,) = [json.loads(line) for line in traces.read_text().splitlines()]
    assert trace["workload"]["uuid"] == WORKLOAD_64
    assert trace["evaluation"]["status"] == "PASSED"
    assert trace["evaluation"]["performance"]["latency_ms"] > 0
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
