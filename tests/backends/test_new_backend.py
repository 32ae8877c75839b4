"""Adding a backend is one folder and one registry line.

The folder is ``tests/support/plugins/numpylang`` (a toy "numpy as a language" backend: a kernel
file is a Python module that writes its outputs with NumPy, on the host device); the line is an
entry point in the group ``accelopt.backends`` that this test writes as a distribution's metadata.
Nothing in ``src/`` names it, and ``accelopt eval`` checks and times its kernel end to end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parents[1] / "support" / "plugins"
ACCELOPT = [sys.executable, "-m", "accelopt"]

SILU = """\
import numpy as np


def kernel(x, y):
    np.multiply(x, 1.0 / (1.0 + np.exp(-x)), out=y)
"""
WRONG = SILU.replace("1.0 / (1.0 + np.exp(-x))", "0.5")


def _registered(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with the numpylang distribution installed: its one registry line."""
    info = tmp_path / "site" / "numpylang-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: numpylang\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[accelopt.backends]\nnumpylang = numpylang:RECORD\n")
    path = os.pathsep.join([str(PLUGINS), str(info.parent)])
    return {**env, "PYTHONPATH": path, "ACCELOPT_WORKSPACE": str(tmp_path / "ws")}


def _eval(
    tmp_path: Path, env: dict[str, str], source: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    kernel = tmp_path / "silu_np.py"
    kernel.write_text(source)
    command = [*ACCELOPT, "eval", "silu", str(kernel), "--backend", "numpylang"]
    return subprocess.run(
        [*command, "--workload", "tiny", "--json", "-", *extra],
        capture_output=True,
        text=True,
        env=_registered(tmp_path, env),
        timeout=300,
    )


def test_accelopt_eval_runs_a_kernel_of_a_backend_registered_from_outside(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    done = _eval(tmp_path, cli_env, SILU)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout[done.stdout.index("{") :])
    assert found["backend"] == "numpylang"
    assert found["status"] == "PASSED", found.get("error")
    assert found["latency_s"] > 0


def test_the_new_backend_is_held_to_the_problem_like_any_other(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    done = _eval(tmp_path, cli_env, WRONG, "--check-only")
    found = json.loads(done.stdout[done.stdout.index("{") :])
    assert found["status"] == "INCORRECT"


def test_an_unregistered_backend_is_one_sentence(tmp_path: Path, cli_env: dict[str, str]) -> None:
    env = {**_registered(tmp_path, cli_env), "PYTHONPATH": str(PLUGINS)}  # the folder, no line
    kernel = tmp_path / "k.py"
    kernel.write_text(SILU)
    done = subprocess.run(
        [*ACCELOPT, "eval", "silu", str(kernel), "--backend", "numpylang"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode != 0
    assert "unknown backend 'numpylang'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture(autouse=True)
def _no_plugin_leaks_into_this_process() -> None:
    from accelopt.backends import registry

    assert "numpylang" not in registry.records()
