"""`accelopt problem add/list/remove` and the commands that take a problem name, on a workspace
problem, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FILES = Path(__file__).parents[1] / "problems" / "workspace_files"

pytestmark = pytest.mark.slow


def test_a_workspace_problem_through_the_command_line(run_cli, tmp_path):
    ws = tmp_path / "ws"
    added = run_cli("problem", "add", FILES / "axpy.py", "--workspace", ws)
    assert added.returncode == 0, added.stderr
    assert "added axpy_rows" in added.stdout and "no baseline kernel" in added.stdout
    listed = json.loads(run_cli("problem", "list", "--workspace", ws, "--json", "-").stdout)
    assert [(r["name"], r["baseline"]) for r in listed] == [("axpy_rows", False)]
    bench = json.loads(run_cli("bench", "list", "--workspace", ws, "--json", "-").stdout)
    origins = {p["name"]: p["origin"] for p in bench}
    assert origins["axpy_rows"] == "workspace" and origins["silu"] == "suite"
    env = {"ACCELOPT_WORKSPACE": str(ws)}  # the variable finds the workspace as --workspace does
    shown = run_cli("bench", "show", "axpy_rows", env=env)
    assert shown.returncode == 0, shown.stderr
    for text in ("kernel arguments", "512×1024", "output", "no baseline kernel"):
        assert text in shown.stdout
    good = run_cli("eval", "axpy_rows", FILES / "axpy_rows.c", "--workload", "tiny", "--workspace",
                   ws, "--min-calls", "5", "--min-time", "0.01", "--json", "-")  # fmt: skip
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["status"] == "PASSED"
    wrong = run_cli("eval", "axpy_rows", FILES / "axpy_rows_wrong.c", "--workload", "tiny",
                    "--check-only", "--json", "-", env=env)  # fmt: skip
    assert json.loads(wrong.stdout)["status"] == "INCORRECT"
    removed = run_cli("problem", "remove", "axpy_rows", "--workspace", ws)
    assert removed.returncode == 0 and "removed axpy_rows" in removed.stdout
    gone = run_cli("eval", "axpy_rows", FILES / "axpy_rows.c", "--workspace", ws)
    assert gone.returncode == 2 and "unknown problem 'axpy_rows'" in gone.stderr


def test_a_broken_problem_file_is_one_sentence_and_adds_nothing(run_cli, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("PROBLEM = (\n")
    out = run_cli("problem", "add", broken, "--workspace", tmp_path / "ws")
    assert out.returncode == 2 and "does not load (SyntaxError" in out.stderr
    assert "Traceback" not in out.stderr
    assert not list((tmp_path / "ws" / "problems").iterdir())
    clash = run_cli("problem", "remove", "silu", "--workspace", tmp_path / "ws")
    assert clash.returncode == 2 and "suite problem" in clash.stderr


def test_a_missing_torch_is_one_sentence_saying_what_to_install(monkeypatch, tmp_path):
    """Without torch: importing a KernelBench file, and evaluating an imported problem."""
    import dataclasses
    import importlib.util

    from accelopt import views
    from accelopt.cli.problem import import_kernelbench
    from accelopt.errors import UserError
    from accelopt.problems.loader import load_problem

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    with pytest.raises(UserError, match=r"needs PyTorch: pip install 'accelopt\[import\]'"):
        import_kernelbench([tmp_path / "19_ReLU.py"], workspace=tmp_path / "ws")
    needs_torch = dataclasses.replace(load_problem("silu"), requires=("torch",))
    with pytest.raises(UserError, match=r"needs the Python module 'torch'.*accelopt\[import\]"):
        views.require_modules(needs_torch)
