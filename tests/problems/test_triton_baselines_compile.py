"""Every shipped Triton baseline compiles for an H100/H200 (sm_90) at the paper sizes, within the
GPU's limits — checked here without a GPU (triton_aot.py), since the interpreter that checks
correctness in CI accepts grids, shared memory and register use a GPU would refuse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelopt.problems.loader import list_problems

pytest.importorskip("torch")
pytest.importorskip("triton")

SCRIPT = Path(__file__).parent / "triton_aot.py"
MAX_SHARED = 227 * 1024  # dynamic shared memory one block may use on sm_90
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_SPILL = 128  # bytes: a baseline may spill a little; more runs from local memory


@pytest.fixture(scope="module")
def launches() -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--workload", "paper"],
        capture_output=True, text=True, env=env, timeout=600, check=True,
    )  # fmt: skip
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_every_problem_launches_at_least_one_kernel(launches: list[dict]) -> None:
    assert {launch["problem"] for launch in launches} == set(list_problems())


@pytest.mark.slow
def test_every_launch_compiles_for_sm_90_within_its_limits(launches: list[dict]) -> None:
    problems = []
    for launch in launches:
        where = f"{launch['problem']}/{launch['kernel']}"
        if "error" in launch:
            problems.append(f"{where}: {launch['error']}")
            continue
        if launch["shared_bytes"] > MAX_SHARED:
            problems.append(f"{where}: {launch['shared_bytes']} bytes of shared memory")
        if launch["spill_bytes"] > MAX_SPILL:
            problems.append(f"{where}: spills {launch['spill_bytes']} bytes")
        grid = launch["grid"] + [1] * (3 - len(launch["grid"]))
        if any(g > limit or g < 1 for g, limit in zip(grid, MAX_GRID, strict=True)):
            problems.append(f"{where}: grid {launch['grid']} exceeds CUDA's limits")
    assert not problems
