"""`accelopt optimize` on a workspace problem that has no kernel: the executor writes a first
kernel from the reference, the fixer repairs it, the search goes on from it; a killed run
resumes without paying for any of that again."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from agents_pool import write_config
from cli_timing import NO_REFERENCES, QUICK_TIMING

from accelopt.store.store import Store
from accelopt.testing.scripted import RecordedRequest, Reply, ScriptedServer

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

FILES = Path(__file__).parents[1] / "problems" / "workspace_files"
CORRECT = (FILES / "axpy_rows.c").read_text()
WRONG = (FILES / "axpy_rows_wrong.c").read_text()
SIMD = CORRECT.replace(
    "for (int j = 0; j < N; j++)", "#pragma omp simd\n        for (int j = 0; j < N; j++)"
)
KERNELBENCH = Path(__file__).parents[1] / "problems" / "kernelbench_files"
# Scalar on purpose (a volatile load per element): the imported ReLU is 24 KiB, so every rotation
# set stays in the cache, and a vectorized loop beat the test ceilings' DRAM bandwidth (SUSPICIOUS)
# on fast machines in about a third of the runs; this test is about drafting, not speed.
RELU = """void kernel(const float *x, float *out) {
    for (int i = 0; i < batch_size * dim; i++) {
        volatile float v = x[i];
        out[i] = v > 0 ? v : 0.0f;
    }
}
"""
# (how the problem gets into the workspace, its name, workload, wrong, correct, faster kernels)
PROBLEMS = {
    "added": (("problem", "add", FILES / "axpy.py"), "axpy_rows", "tiny", WRONG, CORRECT, SIMD),
    "kernelbench": (
        ("problem", "import", "kernelbench", KERNELBENCH / "1_ReLU.py"), "kb_1_relu", "cpu",
        RELU.replace("v : 0.0f", "v : v"), RELU,
        RELU.replace("    for", "#pragma omp simd\n    for"),
    ),
}  # fmt: skip


class DraftingTeam:
    """The first kernel the executor writes is wrong; the fixer repairs it; plans name the simd
    variant. The ``hang_on``-th planner call hangs (30 s) and sets ``paused``."""

    def __init__(self, hang_on: int = 0, kernels: tuple[str, ...] = (WRONG, CORRECT, SIMD)):
        self.wrong, self.correct, self.faster = kernels
        self.lock = threading.Lock()
        self.planner_calls = 0
        self.hang_on = hang_on
        self.paused = threading.Event()
        self.prompts: list[tuple[str, str]] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        prompt = request.messages[-1]["content"]
        with self.lock:
            self.prompts.append((request.model, prompt))
        return getattr(self, request.model)(prompt)

    def planner(self, prompt: str) -> Reply:
        with self.lock:
            self.planner_calls += 1
            hang = self.planner_calls == self.hang_on
        if hang:
            self.paused.set()
            return Reply.slow("too late", 30.0)
        return Reply("TITLE: vectorize columns\nSTEPS:\n1. Add omp simd to the inner loop.\n")

    def executor(self, prompt: str) -> Reply:
        source = self.wrong if "There is none yet" in prompt else self.faster
        return Reply(f"```c\n{source}```\n")

    def fixer(self, prompt: str) -> Reply:
        return Reply(f"```c\n{self.correct}```\n")

    def summarizer(self, prompt: str) -> Reply:
        return Reply("TITLE: simd\nLESSON: Vectorize the inner loop.\n")


def test_a_problem_without_a_kernel_is_drafted_then_optimized_and_resumes(
    run_cli, cli_env, tmp_path
):
    adding, name, workload, *kernels = PROBLEMS["added"]
    ws = tmp_path / "ws"
    assert run_cli(*adding, "--workspace", ws).returncode == 0
    team = DraftingTeam(hang_on=2, kernels=tuple(kernels))  # iteration 2's planner call
    with ScriptedServer(default=team) as server:
        config = write_config(tmp_path / "accelopt.yaml", server.base_url)
        args = ["optimize", name, "--workload", workload, "--beam", "1", "--plans", "1",
                "--samples", "1", "--iterations", "2", "--fixer", "0", "--config", str(config),
                "--workspace", str(ws), "--json", "-", *QUICK_TIMING, *NO_REFERENCES]  # fmt: skip
        proc = subprocess.Popen([sys.executable, "-m", "accelopt", *args], env=cli_env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        assert team.paused.wait(timeout=300), "the run never reached iteration 2"
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        first_prompts = list(team.prompts)
        with Store.open(ws) as store:
            (run,) = store.list_runs()
            kernels = store.kernels(run.id)
            paid = {c.key for c in store.llm_calls(run.id) if c.ok}
        drafted = [k for k in kernels if k.iteration == 0]
        assert [k.origin for k in drafted] == ["executor", "fixer"]
        assert run.baseline_hash == drafted[1].hash  # the repaired draft is the baseline
        assert [m for m, _ in first_prompts[:2]] == ["executor", "fixer"]
        assert "There is none yet" in first_prompts[0][1]
        assert "relative L2 error" in first_prompts[1][1]  # the fixer saw why it failed
        resumed = subprocess.run(
            [sys.executable, "-m", "accelopt", "optimize", "--resume", run.id, "--config",
             str(config), "--workspace", str(ws), "--json", "-"],
            env=cli_env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        new_prompts = team.prompts[len(first_prompts) :]
    assert all(model in {"planner", "executor", "summarizer"} for model, _ in new_prompts)
    assert not any("There is none yet" in p for _, p in new_prompts)  # the draft: replayed
    summary = json.loads(resumed.stdout)
    assert summary["status"] == "finished" and summary["baseline"]["hash"] == run.baseline_hash
    with Store.open(ws) as store:
        fresh = [c for c in store.llm_calls(run.id) if not c.replayed and c.ok]
        assert len({c.key for c in fresh}) == len(fresh)
        assert {c.key for c in fresh} >= paid
        assert [i.iteration for i in store.iterations(run.id)] == [0, 1, 2]
    usage = summary["usage"]
    assert usage["executor"]["calls"] >= 1 and usage["fixer"]["calls"] >= 1


def test_a_kernelbench_problem_is_drafted_from_its_pytorch_reference(run_cli, tmp_path):
    """The same first steps for an imported KernelBench problem, whose reference is PyTorch code
    (the kill and resume above are the loop's, whatever the problem's origin)."""
    pytest.importorskip("torch")
    adding, name, workload, *kernels = PROBLEMS["kernelbench"]
    ws = tmp_path / "ws"
    assert run_cli(*adding, "--workspace", ws).returncode == 0
    team = DraftingTeam(kernels=tuple(kernels))
    with ScriptedServer(default=team) as server:
        config = write_config(tmp_path / "accelopt.yaml", server.base_url)
        out = run_cli("optimize", name, "--workload", workload, "--beam", "1", "--plans", "1",
                      "--samples", "1", "--iterations", "1", "--fixer", "0", "--config", config,
                      "--workspace", ws, "--json", "-", *QUICK_TIMING, *NO_REFERENCES)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "finished"
    with Store.open(ws) as store:
        (run,) = store.list_runs()
        drafted = [k.origin for k in store.kernels(run.id) if k.iteration == 0]
    assert drafted == ["executor", "fixer"]  # the wrong draft, then the fixer's repair
    assert "There is none yet" in team.prompts[0][1] and "torch" in team.prompts[0][1]


def test_a_draft_that_never_passes_ends_in_one_sentence(run_cli, tmp_path):
    ws = tmp_path / "ws"
    assert run_cli("problem", "add", FILES / "axpy.py", "--workspace", ws).returncode == 0
    team = DraftingTeam()
    team.fixer = lambda prompt: Reply(f"```c\n{WRONG}```\n")  # type: ignore[method-assign]
    with ScriptedServer(default=team) as server:
        config = write_config(tmp_path / "accelopt.yaml", server.base_url)
        out = run_cli("optimize", "axpy_rows", "--workload", "tiny", "--iterations", "1",
                      "--config", config, "--workspace", ws)  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "wrote no passing first kernel" in out.stderr and "--kernel FILE" in out.stderr
    drafts = [m for m, _ in team.prompts]
    assert drafts.count("executor") == 2 and drafts.count("fixer") == 4  # 2 attempts × 2 rounds
