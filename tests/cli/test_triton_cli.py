"""The triton backend from the command line, on a machine without a GPU: the suite's baselines are
checked in Triton's CPU interpreter; timing and measuring say what they need."""

from __future__ import annotations

import json
import shutil

import pytest

from accelopt.backends.registry import shipped_kernel
from accelopt.problems.loader import list_problems, load_problem

pytest.importorskip("triton")
pytest.importorskip("torch")

INTERPRET = {"TRITON_INTERPRET": "1"}
no_gpu = pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine")


def test_every_problem_ships_a_triton_baseline_and_a_tiny_workload() -> None:
    for name in list_problems():
        problem = load_problem(name)
        assert shipped_kernel(problem, "baseline", "triton").is_file(), name
        assert "tiny" in problem.workloads, name


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bench_run_checks_every_triton_baseline_in_the_interpreter(run_cli) -> None:
    out = run_cli(
        "bench", "run", "--backend", "triton", "--workload", "tiny", "--check-only",
        "--kernel", "baseline", "--seeds", "3", "--json", "-", env=INTERPRET,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert {r["problem"] for r in rows} == set(list_problems())
    failed = {r["problem"]: r["error"] for r in rows if r["status"] != "PASSED"}
    assert not failed
    assert all(r["backend"] == "triton" and r["hardware"].startswith("triton-interpreter")
               for r in rows)  # fmt: skip


def test_timing_in_the_interpreter_is_refused_with_what_to_do(run_cli) -> None:
    out = run_cli("bench", "run", "--backend", "triton", "--workload", "tiny", env=INTERPRET)
    assert out.returncode == 2
    assert "--check-only" in out.stderr
    assert "Traceback" not in out.stderr


@no_gpu
def test_without_a_gpu_the_triton_backend_says_what_to_do(run_cli) -> None:
    out = run_cli("eval", "silu", shipped_kernel(load_problem("silu"), "baseline", "triton"),
                  "--backend", "triton", "--check-only", env={"TRITON_INTERPRET": "0"})  # fmt: skip
    assert out.returncode == 2
    assert "NVIDIA GPU" in out.stderr and "TRITON_INTERPRET=1" in out.stderr


def test_eval_of_a_triton_file_in_the_interpreter(run_cli) -> None:
    path = shipped_kernel(load_problem("silu"), "baseline", "triton")
    out = run_cli("eval", "silu", path, "--backend", "triton", "--workload", "tiny",
                  "--check-only", "--json", "-", env=INTERPRET)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "PASSED"


@no_gpu
def test_hardware_for_triton_without_a_gpu(run_cli) -> None:
    shown = run_cli("hardware", "--backend", "triton")
    assert shown.returncode == 0
    assert "No NVIDIA GPU here" in shown.stdout and "h200" in shown.stdout
    measured = run_cli("hardware", "--backend", "triton", "--measure")
    assert measured.returncode == 2
    assert "NVIDIA GPU" in measured.stderr
