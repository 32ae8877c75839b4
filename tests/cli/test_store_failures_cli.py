"""The store's failures as a user meets them: one sentence, exit status 2, no traceback.

- a workspace whose disk fills mid-run (a small tmpfs): the run stays ``running`` and resumes
  once space is freed; a resume on the full disk is one sentence too;
- a damaged ``kernel_sources`` row: ``runs show`` of another run works, the damaged run's is one
  sentence naming the row, ``store check`` names it (exit 1), a new run of that kernel works;
- a read-only workspace (a read-only bind mount: tests run as root, which ignores permission
  bits): ``runs list``, ``runs show``, ``runs compare`` and ``report`` read it, and the read-only
  views never open the store for writing.

The mounts need root (skipped elsewhere); the optimize runs are autotune runs (no LLM)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_timing import QUICK_TIMING
from mounts import fill, grow, read_only_view, small_disk
from typer.testing import CliRunner

from accelopt.cli.app import app
from accelopt.store.records import RunStatus
from accelopt.store.store import Store

pytestmark = pytest.mark.slow
UNSET = {"ACCELOPT_LLM_BASE_URL": "", "ACCELOPT_LLM_MODEL": "", "COLUMNS": "1000"}
AUTOTUNE = ("--strategy", "autotune", "--kernel", "expert", "--iterations", "1", "--variants",
            "2", "--workload", "small", *QUICK_TIMING, "--no-references")  # fmt: skip
# The command line with the pre-flight's free-space floor at 0, so that a small disk is let in
# and fills mid-run (what the floor is for is tested on its own).
NO_FLOOR = (
    "import sys; import accelopt.store.space as space; space.MIN_FREE_BYTES = 0; "
    "from accelopt.cli.app import main; sys.argv[0] = 'accelopt'; main()"
)


def one_sentence(out: subprocess.CompletedProcess[str], *parts: str) -> str:
    assert out.returncode == 2, (out.stdout[-2000:], out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = [line for line in out.stderr.strip().splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, out.stderr
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def finished(run_cli, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A workspace with a finished matmul run and a finished silu run: (workspace, ids)."""
    ws = tmp_path_factory.mktemp("finished") / "ws"
    ids = []
    for problem in ("matmul", "silu"):
        out = run_cli("optimize", problem, *AUTOTUNE, "--workspace", ws, "--json", "-", env=UNSET)
        assert out.returncode == 0, out.stderr
        ids.append(json.loads(out.stdout)["run"])
    return ws, ids[0], ids[1]


def _optimize(cli_env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", NO_FLOOR, "optimize", *map(str, args)],
        capture_output=True, text=True, env={**cli_env, **UNSET}, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("size", ["320k", "448k"])  # full before the run ends
def test_a_workspace_filling_mid_run_is_one_sentence_and_resumes(
    cli_env: dict[str, str], tmp_path: Path, size: str
) -> None:
    with small_disk(tmp_path / "disk", size) as ws:
        out = _optimize(cli_env, "matmul", *AUTOTUNE, "--workspace", ws)
        with Store.open_readonly(ws) as store:
            (run,) = store.list_runs()
        one_sentence(out, f"the workspace {ws} is full", f"optimize --resume {run.id}`")
        assert run.status is RunStatus.RUNNING  # not marked failed on the full disk
        again = _optimize(cli_env, "--resume", run.id, "--workspace", ws)
        one_sentence(again, f"the workspace {ws} is full", "free space")  # still full
        grow(ws, "32m")
        resumed = _optimize(cli_env, "--resume", run.id, "--workspace", ws, "--json", "-")
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["status"] == "finished"


def test_resuming_a_finished_run_on_a_full_disk_is_one_sentence(
    cli_env: dict[str, str], finished: tuple[Path, str, str], tmp_path: Path
) -> None:
    source, matmul, _ = finished
    with small_disk(tmp_path / "disk", "8m") as ws:
        shutil.copyfile(source / "accelopt.db", ws / "accelopt.db")
        fill(ws)
        out = _optimize(cli_env, "--resume", matmul, "--workspace", ws)
        one_sentence(out, f"the workspace {ws} is full", "free space", "run the command again")
        with Store.open_readonly(ws) as store:
            assert store.get_run(matmul).status is RunStatus.FINISHED


def test_a_damaged_source_is_named_and_blocks_no_other_run(
    run_cli, finished: tuple[Path, str, str], tmp_path: Path
) -> None:
    source, matmul, silu = finished
    ws = tmp_path / "ws"
    shutil.copytree(source, ws)
    with Store.open_readonly(ws) as store:
        baseline = store.get_run(matmul).baseline_hash
    with sqlite3.connect(ws / "accelopt.db") as conn:
        conn.execute(
            "UPDATE kernel_sources SET source = CAST(x'ff00fe' || CAST(source AS BLOB) AS TEXT)"
            " WHERE hash = ?", (baseline,),
        )  # fmt: skip
    assert run_cli("runs", "show", silu, "--workspace", ws).returncode == 0
    assert run_cli("runs", "list", "--workspace", ws).returncode == 0
    one_sentence(run_cli("runs", "show", matmul, "--workspace", ws, env=UNSET),
                 f"kernel_sources with hash={baseline!r}", "accelopt store check")  # fmt: skip
    check = run_cli("store", "check", "--workspace", ws, "--json", "-", env=UNSET)
    assert check.returncode == 1 and "Traceback" not in check.stderr, check.stderr
    (bad,) = json.loads(check.stdout)["rows"]
    assert (bad["table"], bad["key"]) == ("kernel_sources", f"hash={baseline!r}")
    new = run_cli("optimize", "matmul", *AUTOTUNE, "--workspace", ws, env=UNSET)
    assert new.returncode == 0, new.stderr
    assert "damaged" in new.stderr  # the warning: the source was replaced
    assert run_cli("store", "check", "--workspace", ws).returncode == 0
    assert run_cli("runs", "show", matmul, "--workspace", ws).returncode == 0


def test_read_only_views_read_a_read_only_workspace(
    run_cli, finished: tuple[Path, str, str], tmp_path: Path
) -> None:
    source, matmul, silu = finished
    before = (source / "accelopt.db").read_bytes()
    with read_only_view(source, tmp_path / "view") as ws:
        listed = run_cli("runs", "list", "--workspace", ws, "--json", "-")
        assert listed.returncode == 0, listed.stderr
        assert {r["run"] for r in json.loads(listed.stdout)} == {matmul, silu}
        for args in (("runs", "show", matmul), ("runs", "compare", matmul, silu),
                     ("report", matmul, "--out", tmp_path / "r.html"), ("store", "check"),
                     ("memory", "list")):  # fmt: skip
            out = run_cli(*args, "--workspace", ws)
            assert out.returncode == 0, (args, out.stderr)
        one_sentence(run_cli("optimize", "--resume", matmul, "--workspace", ws, env=UNSET),
                     "is not writable")  # fmt: skip
    assert (source / "accelopt.db").read_bytes() == before


def test_read_only_views_never_open_the_store_for_writing(
    finished: tuple[Path, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, matmul, silu = finished
    ws = tmp_path / "ws"
    shutil.copytree(source, ws)

    def refused(path: Path) -> None:
        raise AssertionError(f"a read-only view opened {path} for writing")

    monkeypatch.setattr("accelopt.store.database.connect", refused)
    runner = CliRunner()
    for args in (("runs", "list"), ("runs", "show", matmul), ("runs", "compare", matmul, silu),
                 ("report", matmul, "--out", str(tmp_path / "r.html")), ("store", "check"),
                 ("memory", "list")):  # fmt: skip
        result = runner.invoke(app, [*args, "--workspace", str(ws)])
        assert result.exit_code == 0, (args, result.exception, result.output)


def test_the_preflight_refuses_a_cache_without_room(run_cli, tmp_path: Path) -> None:
    kernel = tmp_path / "k.c"
    kernel.write_text("void kernel(const float *x, float *y) {}\n")
    with small_disk(tmp_path / "disk", "512k") as cache:
        out = run_cli("eval", "silu", kernel, env={"ACCELOPT_CACHE_DIR": str(cache), **UNSET})
        one_sentence(out, f"the cache folder {cache} has", "MiB free", "ACCELOPT_CACHE_DIR")


def test_a_kernel_written_to_a_full_disk_is_one_sentence(run_cli, tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "64k") as disk:
        fill(disk, leave=0)
        out = run_cli("optimize", "silu", *AUTOTUNE, "--workspace", tmp_path / "ws",
                      "--out", disk / "best.c", env=UNSET)  # fmt: skip
        one_sentence(out, "No space left on device", "free space there")
