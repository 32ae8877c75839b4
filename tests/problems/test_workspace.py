"""Workspace problems: added from a file, checked, found by every command, shipped to workers,
and cached under their fingerprint so that an edited problem is never judged by a stale
reference or verdict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.problems.loader import (
    ProblemFileError,
    UnknownProblemError,
    list_problems,
    load_problem,
    problems_dir,
    suite_names,
)
from accelopt.problems.shipping import problem_ref, resolve_ref
from accelopt.problems.workspace import add_problem, check_problem, remove_problem
from accelopt.profiling.config import EvalConfig, harness_key
from accelopt.profiling.factory import make_profiler
from accelopt.store.store import Store

FILES = Path(__file__).parent / "workspace_files"
AXPY = FILES / "axpy.py"


def edited(tmp_path: Path, old: str, new: str, name: str = "edited.py") -> Path:
    """A copy of the axpy problem file with one edit."""
    text = AXPY.read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


def leftovers(workspace: Path) -> list[str]:
    return sorted(p.name for p in problems_dir(workspace).iterdir())


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def test_an_added_problem_is_listed_and_loaded_beside_the_suite(ws):
    added = add_problem(AXPY, ws)
    assert added.name == "axpy_rows" and added.origin == "workspace"
    assert added.directory == (problems_dir(ws) / "axpy_rows").resolve()
    assert len(added.fingerprint) == 16
    names = list_problems(ws)
    assert names[: len(suite_names())] == suite_names() and names[-1] == "axpy_rows"
    again = load_problem("axpy_rows", ws)
    assert again.fingerprint == added.fingerprint and again.origin == "workspace"
    assert load_problem("silu", ws).origin == "suite" and load_problem("silu").fingerprint == ""
    with pytest.raises(UnknownProblemError, match="accelopt problem add"):
        load_problem("axpy_rows", ws / "elsewhere")


def test_a_suite_name_or_a_second_add_is_refused_and_replace_replaces(ws, tmp_path):
    with pytest.raises(ProblemFileError, match="suite has a problem named 'silu'"):
        add_problem(edited(tmp_path, 'name="axpy_rows"', 'name="silu"'), ws)
    add_problem(AXPY, ws)
    with pytest.raises(ProblemFileError, match="--replace"):
        add_problem(AXPY, ws)
    looser = edited(tmp_path, 'description="Scale', 'tolerance=1e-3,\n    description="Scale')
    replaced = add_problem(looser, ws, replace=True)
    assert replaced.tolerance == 1e-3
    assert leftovers(ws) == ["axpy_rows"]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('name="axpy_rows"', 'name="Axpy Rows"', "lowercase letters"),
        ('TensorSpec("a", ("N",))', 'TensorSpec("a", ("P",))', "no size parameter"),
        ('TensorSpec("b", ("N",))', 'TensorSpec("int", ("N",))', "not usable as a C parameter"),
        ('TensorSpec("b", ("N",))', 'TensorSpec("M", ("N",))', "also a size parameter"),
        ('{"M": 8, "N": 16}', '{"M": 8}', "gives no positive size for: N"),
        ("bytes=lambda s: 4 *", "bytes=lambda s: -4 *", "not a finite count"),
        ("return (x * a[None, :] + b[None, :],)", "return (x.T,)", "must return a tuple"),
        ("return (x * a[None, :]", "return (x / 0 * a[None, :]", "NaN or Inf"),
        ("import numpy as np", "import numpy as np\nraise RuntimeError('boom')", "does not load"),
        ("PROBLEM = Problem(", "OTHER = Problem(", "must define PROBLEM"),
    ],
)
def test_a_wrong_problem_is_refused_with_its_reason_and_leaves_nothing(
    ws, tmp_path, old, new, message
):
    with pytest.raises(ProblemFileError, match=message):
        add_problem(edited(tmp_path, old, new), ws)
    assert leftovers(ws) == []


def test_a_folder_with_its_data_and_baseline_is_added_whole(ws, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copyfile(AXPY, folder / "problem.py")
    (folder / "notes.txt").write_text("data the problem could read\n")
    added = add_problem(folder, ws, baseline=FILES / "axpy_rows.c")
    assert (added.directory / "notes.txt").is_file()
    assert shipped_kernel(added, "baseline").read_text() == (FILES / "axpy_rows.c").read_text()
    with pytest.raises(ProblemFileError, match=r"\.c \(cpu\) or \.py"):
        add_problem(AXPY, ws, baseline=FILES / "missing.c", replace=True)


def test_removing_deletes_the_folder_and_refuses_what_is_not_a_workspace_problem(ws):
    add_problem(AXPY, ws)
    remove_problem("axpy_rows", ws)
    assert leftovers(ws) == [] and "axpy_rows" not in list_problems(ws)
    with pytest.raises(ProblemFileError, match="no problem named"):
        remove_problem("axpy_rows", ws)
    with pytest.raises(ProblemFileError, match="suite problem"):
        remove_problem("silu", ws)


def test_the_fingerprint_follows_the_problem_not_its_kernels(ws):
    added = add_problem(AXPY, ws, baseline=FILES / "axpy_rows.c")
    (added.directory / "baseline.c").write_text("/* edited */\n")
    assert load_problem("axpy_rows", ws).fingerprint == added.fingerprint
    path = added.directory / "problem.py"
    path.write_text(path.read_text().replace('"M": 512', '"M": 256'))
    changed = load_problem("axpy_rows", ws)
    assert changed.fingerprint != added.fingerprint
    assert changed.workload("cpu").sizes["M"] == 256


def test_suite_problems_pass_their_own_checks():
    for name in suite_names():
        assert check_problem(load_problem(name)) == [], name


def test_a_worker_gets_the_problem_as_it_was_sent(ws, tmp_path):
    added = add_problem(AXPY, ws)
    ref = json.loads(json.dumps(problem_ref(added)))  # it crosses a process boundary as JSON
    shutil.rmtree(ws)  # the worker never reads the workspace
    for cache in (tmp_path / "worker-a", tmp_path / "worker-a", tmp_path / "worker-b"):
        got = resolve_ref(ref, cache)
        assert got.fingerprint == added.fingerprint and got.name == "axpy_rows"
        assert got.workload("cpu").sizes == added.workload("cpu").sizes
    assert problem_ref(load_problem("silu")) == {"name": "silu"}
    assert resolve_ref("silu").origin == "suite"


def test_a_problem_file_path_cannot_leave_the_worker_cache(ws, tmp_path):
    ref = problem_ref(add_problem(AXPY, ws))
    ref["files"]["../../escaped.py"] = ref["files"]["problem.py"]
    ref["fingerprint"] = "0" * 16
    with pytest.raises(ValueError, match="leaves the problem's folder"):
        resolve_ref(ref, tmp_path / "cache")
    assert not list(tmp_path.rglob("escaped.py"))


@pytest.mark.slow
def test_evaluations_are_cached_under_the_problem_fingerprint(ws, hw, accelopt_cache):
    """A correct kernel passes and a wrong one fails on a workspace problem; editing the
    problem (its tolerance) makes the cached verdict unreachable, so the kernel is measured
    again."""
    problem = add_problem(AXPY, ws)
    good = Kernel((FILES / "axpy_rows.c").read_text(), "cpu", "good")
    wrong = Kernel((FILES / "axpy_rows_wrong.c").read_text(), "cpu", "wrong")
    config = EvalConfig(seeds=2, min_calls=5, min_time_s=0.01, workers=1)
    with Store.open(ws) as store, make_profiler("local", hw, config, store=store) as prof:
        first = prof.evaluate(good, problem, "tiny")
        assert first.status.value == "PASSED" and first.problem_version == problem.fingerprint
        assert prof.evaluate(wrong, problem, "tiny").status.value == "INCORRECT"
        assert prof.evaluate(good, problem, "tiny").seeds == first.seeds
        assert prof.cache_hits == 1
        cached = store.get_evaluation(
            good.hash, "axpy_rows", "tiny", hw.key(), problem_version=problem.fingerprint
        )
        assert cached is not None
        assert store.get_evaluation(good.hash, "axpy_rows", "tiny", hw.key()) is None
        path = problem.directory / "problem.py"
        path.write_text(
            path.read_text().replace("PROBLEM = Problem(", "PROBLEM = Problem(tolerance=1e-3,")
        )
        changed = load_problem("axpy_rows", ws)
        again = prof.evaluate(good, changed, "tiny")
        assert prof.measured == 3 and again.problem_version == changed.fingerprint
        assert again.tolerance == 1e-3
    assert harness_key(changed.fingerprint).endswith(changed.fingerprint)


def test_a_worker_gets_the_version_that_was_loaded_not_a_later_edit(ws, tmp_path):
    loaded = add_problem(AXPY, ws)
    path = loaded.directory / "problem.py"
    path.write_text(path.read_text().replace('"M": 512', '"M": 256'))
    got = resolve_ref(problem_ref(loaded), tmp_path / "worker")
    assert got.fingerprint == loaded.fingerprint
    assert got.workload("cpu").sizes["M"] == 512


def test_the_shipped_files_are_encoded_once_and_a_caller_cannot_spoil_them(ws, monkeypatch):
    import accelopt.problems.shipping as shipping

    added = add_problem(AXPY, ws)
    shipping._REFS.pop(added.fingerprint, None)
    first = problem_ref(added)
    first["files"]["problem.py"] = "spoiled"
    monkeypatch.setattr(shipping, "snapshot", lambda p: pytest.fail("encoded again"))
    assert problem_ref(added)["files"]["problem.py"] != "spoiled"


@pytest.mark.parametrize("text", ["x = 1\n", "def broken(:\n"])
def test_a_problem_file_error_names_the_users_file_and_a_document_that_has_it(
    tmp_path: Path, text: str
) -> None:
    """Issue 46, defect 15: never the staged copy (``.adding-*/probe/problem.py``)."""
    mine = tmp_path / "mine.py"
    mine.write_text(text)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "problem.py").write_text(text)
    for source, named in ((mine, mine), (folder, folder / "problem.py")):
        with pytest.raises(ProblemFileError) as raised:
            add_problem(source, tmp_path / "ws")
        message = str(raised.value)
        assert f"problem file {named.resolve()} " in message and ".adding-" not in message
    if "PROBLEM" in message or "Problem(" in message:
        assert "see docs/usage.md, 'Your own operator'" in message
