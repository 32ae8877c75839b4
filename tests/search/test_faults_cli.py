"""A full disk is not a kernel's verdict, end to end: an autotune run whose compile cache sits on
a full disk says that no variant could be evaluated (not "already the fastest"), and caches
nothing of it; the same command with a healthy cache dir, in the same workspace, measures them
all. The disk is a 2 MiB tmpfs (root only: skipped elsewhere)."""

from __future__ import annotations

import shutil
from pathlib import Path

import mounts
import pytest
from cli_timing import NO_REFERENCES, QUICK_TIMING

from accelopt.backends.registry import shipped_kernel
from accelopt.backends.tunables import find_tunables
from accelopt.problems import load_problem

pytestmark = pytest.mark.slow
AUTOTUNE = ("optimize", "silu", "--strategy", "autotune", "--kernel", "expert", "--iterations",
            "1", "--workload", "small", *QUICK_TIMING, *NO_REFERENCES)  # fmt: skip
UNMEASURED = ("not evaluated", "could not be evaluated", "COMPILE_ERROR", "CRASH")


def test_a_full_compile_cache_is_no_verdict_and_a_healthy_one_measures_every_variant(
    run_cli, cli_env: dict[str, str], tmp_path: Path
) -> None:
    with mounts.small_disk(tmp_path / "disk", "2m") as small_disk:
        _starve_then_heal(run_cli, cli_env, small_disk, tmp_path)


def _starve_then_heal(run_cli, cli_env: dict[str, str], small_disk: Path, tmp_path: Path) -> None:
    shutil.copytree(Path(cli_env["ACCELOPT_CACHE_DIR"]) / "hardware", small_disk / "hardware")
    full = {"ACCELOPT_CACHE_DIR": str(small_disk)}
    expert = shipped_kernel(load_problem("silu"), "expert")
    ws = tmp_path / "ws"
    warm = run_cli("eval", "silu", expert, "--workload", "small", *QUICK_TIMING,
                   "--workspace", tmp_path / "other", env=full)  # fmt: skip
    assert warm.returncode == 0, warm.stderr  # the kernel as written is built; its variants not
    mounts.fill(small_disk, leave=8 << 10)
    starved = run_cli(*AUTOTUNE, "--workspace", ws, env=full)
    assert "Traceback" not in starved.stderr and "already the fastest" not in starved.stdout
    if starved.returncode == 2:  # refused before any work: the cache folder has no room
        assert str(small_disk) in starved.stderr and "free" in starved.stderr, starved.stderr
    else:  # measured: the variants could not be built, and it says so
        assert "no variant could be evaluated" in starved.stdout, starved.stdout
        assert "No space left on device" in starved.stderr
    healthy = run_cli(*AUTOTUNE, "--workspace", ws)
    assert healthy.returncode == 0, healthy.stderr
    table = healthy.stdout.split("variants of kernel", 1)[1]
    names = [t.name for t in find_tunables(expert.read_text())]
    rows = [line for line in table.splitlines()
            if line.startswith("│") and any(f"{n}=" in line for n in names)]  # fmt: skip
    assert len(rows) == 8
    assert not [row for row in rows if any(word in row for word in UNMEASURED)], table
