"""What a new user meets first (issue 46, defects 11 and 17): the README's set-up installs what
`.ci/run` installs, `accelopt --version` answers, and a misspelt problem gets the nearest name."""

from __future__ import annotations

import json
import re
from pathlib import Path

from accelopt import __version__

REPO = Path(__file__).parents[2]
EXTRAS = re.compile(r"pip install[^\n]*-e '\.\[([a-z,]+)\]'")


def test_the_readme_sets_up_what_ci_installs() -> None:
    readme = EXTRAS.search((REPO / "README.md").read_text())
    ci = EXTRAS.search((REPO / ".ci" / "run").read_text())
    assert readme is not None and ci is not None
    assert readme[1] == ci[1] and "serve" in readme[1].split(",")  # serve and mcp are toured


def test_version(run_cli) -> None:
    out = run_cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"accelopt {__version__}"


def test_a_misspelt_problem_gets_the_nearest_name(run_cli) -> None:
    out = run_cli("bench", "show", "matmull")
    assert out.returncode == 2 and "did you mean 'matmul'?" in out.stderr


def test_a_run_whose_endpoint_cannot_be_reached_is_failed_not_running(run_cli, tmp_path) -> None:
    ws = tmp_path / "ws"
    dead = {"ACCELOPT_LLM_BASE_URL": "http://127.0.0.1:9/v1", "ACCELOPT_LLM_MODEL": "m"}
    out = run_cli("optimize", "silu", "--workload", "small", "--workspace", ws, env=dead)
    assert out.returncode == 2 and "cannot reach the LLM endpoint" in out.stderr
    listed = run_cli("runs", "list", "--workspace", ws, "--json", "-")
    assert [r["status"] for r in json.loads(listed.stdout)] == ["failed"]  # never "running"


def test_no_help_shows_a_flag_as_taking_a_value(capsys, monkeypatch) -> None:
    """Issue 46, defect 17: ``--check-only <bool>`` read as if the flag took a value."""
    from accelopt.cli.app import command

    monkeypatch.setenv("COLUMNS", "120")
    root = command()
    paths = [[]] + [[name] for name in root.commands]
    paths += [[name, sub] for name, group in root.commands.items()
              for sub in getattr(group, "commands", {})]  # fmt: skip
    for path in paths:
        root.main(args=[*path, "--help"], prog_name="accelopt", standalone_mode=False)
        shown = capsys.readouterr().out
        assert "Usage" in shown and "<bool>" not in shown, path
    assert len(paths) > 20
