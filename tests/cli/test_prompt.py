"""`accelopt prompt`: what each agent would receive, rendered without calling it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

VARIANTS = Path(__file__).parents[1] / "search" / "variants"


def test_each_agents_messages_are_printed(run_cli, tmp_path):
    ws = ("--workspace", tmp_path / "ws", "--workload", "small")
    planner = run_cli("prompt", "matmul", "--agent", "planner", *ws)
    assert planner.returncode == 0, planner.stderr
    assert "system" in planner.stdout and "# Its profile" in planner.stdout
    executor = json.loads(run_cli("prompt", "matmul", "--agent", "executor", "--plan", "Unroll",
                                  "--step", "unroll by 4", *ws, "--json", "-").stdout)  # fmt: skip
    user = executor["messages"][-1]["content"]
    assert executor["agent"] == "executor" and "Unroll" in user and "unroll by 4" in user
    broken = VARIANTS / "matmul_broken.c"
    fixer = run_cli("prompt", "matmul", "--agent", "fixer", "--kernel", broken, *ws)
    assert fixer.returncode == 0, fixer.stderr
    assert "COMPILE_ERROR" in fixer.stdout and "error" in fixer.stdout
    pair = ("--kernel", VARIANTS / "matmul_good.c", "--slow", VARIANTS / "matmul_slow.c")
    summarizer = run_cli("prompt", "matmul", "--agent", "summarizer", *pair, *ws)
    assert summarizer.returncode == 0, summarizer.stderr
    assert "faster" in summarizer.stdout


def test_prompt_refuses_what_an_agent_would_never_get(run_cli, tmp_path):
    ws = ("--workspace", tmp_path / "ws", "--workload", "small")
    unknown = run_cli("prompt", "matmul", "--agent", "critic", *ws)
    assert unknown.returncode == 2 and "unknown agent 'critic'" in unknown.stderr
    passing = run_cli("prompt", "matmul", "--agent", "fixer", *ws)
    assert passing.returncode == 2 and "only kernels that fail" in passing.stderr
    alone = run_cli("prompt", "matmul", "--agent", "summarizer", *ws)
    assert alone.returncode == 2 and "--kernel" in alone.stderr
    assert "Traceback" not in unknown.stderr + passing.stderr + alone.stderr
