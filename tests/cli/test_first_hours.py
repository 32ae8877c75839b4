"""What a new user meets first (issue 46, defects 11 and 17): the README's set-up installs what
`.ci/run` installs, `accelopt --version` answers, and a misspelt problem gets the nearest name."""

from __future__ import annotations

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
