"""Bad input on the command line: one sentence on stderr, exit status 2, never a traceback, and
output paths checked before the work (so no result is lost to a bad path after it ran)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from accelopt.backends.registry import shipped_kernel
from accelopt.cli.app import app
from accelopt.errors import UserError
from accelopt.problems import load_problem

WIDE = {"COLUMNS": "1000"}  # no wrapping: a sentence is one line
as_root = pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only directory")


def assert_one_sentence(out: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    for part in parts:
        assert part in lines[0], lines[0]


@pytest.fixture()
def kernel(tmp_path: Path) -> Path:
    path = tmp_path / "k.c"
    path.write_text(shipped_kernel(load_problem("silu"), "baseline").read_text())
    return path


@pytest.fixture()
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "a_file"
    path.write_text("not a directory\n")
    return path


# -- --json (and the other output paths) are checked before the work ---------------------------


def commands_with_json(group: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The command paths (e.g. ("bench", "run")) that take --json, found in the command tree."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group (typer's own click has its own classes)
            yield from commands_with_json(command, (*prefix, name))
        elif any("--json" in p.opts for p in command.params):
            yield (*prefix, name)


JSON_COMMANDS = sorted(commands_with_json(typer.main.get_command(app)))


def test_every_json_command_is_found() -> None:
    assert {("eval",), ("bench", "run"), ("hardware",), ("optimize",), ("runs", "compare"),
            ("memory", "list"), ("llm", "check")} <= set(JSON_COMMANDS)  # fmt: skip


@pytest.mark.parametrize("command", JSON_COMMANDS, ids=" ".join)
def test_every_json_path_is_checked_first(command: tuple[str, ...], tmp_path: Path) -> None:
    """Given only --json, the path is what fails: before any argument, before any work."""
    target = tmp_path / "no_such_dir" / "x.json"
    result = CliRunner().invoke(app, [*command, "--json", str(target)])
    assert isinstance(result.exception, UserError), (result.exception, result.output)
    assert "no_such_dir' does not exist" in str(result.exception)
    assert not target.parent.exists()


def test_eval_json_into_a_missing_directory(run_cli, kernel: Path, tmp_path: Path) -> None:
    out = run_cli("eval", "silu", kernel, "--check-only", "--json", tmp_path / "nope" / "x.json",
                  env=WIDE)  # fmt: skip
    assert_one_sentence(out, "--json", "does not exist", "create that directory")
    assert "PASSED" not in out.stdout  # nothing was evaluated


def test_json_to_a_directory(run_cli, kernel: Path, tmp_path: Path) -> None:
    out = run_cli("eval", "silu", kernel, "--check-only", "--json", tmp_path, env=WIDE)
    assert_one_sentence(out, "is a directory", "give a file path")


def test_json_below_a_file(run_cli, a_file: Path) -> None:
    out = run_cli("bench", "list", "--json", a_file / "x.json", env=WIDE)
    assert_one_sentence(out, "is not a directory")


@as_root
def test_json_in_a_read_only_directory(run_cli, tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    out = run_cli("bench", "list", "--json", folder / "x.json", env=WIDE)
    assert_one_sentence(out, "cannot be written", "Permission denied")


def test_an_existing_json_file_is_kept_until_written(run_cli, tmp_path: Path) -> None:
    target = tmp_path / "old.json"
    target.write_text("[]\n")
    out = run_cli("bench", "list", "--json", target)
    assert out.returncode == 0, out.stderr
    assert "silu" in target.read_text()


def test_a_json_path_that_is_fine_leaves_no_file_behind_when_the_command_fails(
    run_cli, tmp_path: Path
) -> None:
    target = tmp_path / "x.json"
    out = run_cli("eval", "nosuch", "k.c", "--json", target)
    assert out.returncode == 2 and not target.exists()


def test_html_and_out_are_checked_before_the_work(run_cli, a_file: Path, tmp_path: Path) -> None:
    out = run_cli("bench", "run", "--problem", "silu", "--html", a_file / "r.html", env=WIDE)
    assert_one_sentence(out, "--html", "is not a directory")
    out = run_cli("report", "somerun", "--out", a_file / "deep" / "r.html", "--workspace",
                  tmp_path / "ws", env=WIDE)  # fmt: skip
    assert_one_sentence(out, "--out", "is not a directory")
    out = run_cli("memory", "export", a_file / "x.jsonl", "--workspace", tmp_path / "ws", env=WIDE)
    assert_one_sentence(out, "export file", "is not a directory")


# -- files the user names ---------------------------------------------------------------------


def test_a_directory_as_the_kernel_file(run_cli, tmp_path: Path) -> None:
    out = run_cli("eval", "silu", tmp_path, env=WIDE)
    assert_one_sentence(out, "kernel file", "is a directory", "kernel source")


def test_a_kernel_file_that_is_not_utf8(run_cli, tmp_path: Path) -> None:
    path = tmp_path / "k.c"
    path.write_bytes(b"void kernel() {}\n/* \xff\xfe */\n")
    out = run_cli("eval", "silu", path, env=WIDE)
    assert_one_sentence(out, "is not UTF-8 text", "save it as UTF-8")


@pytest.mark.parametrize(
    ("content", "parts"),
    [
        (b"llm:\n  default: {model: \xff\xfe}\n", ("not UTF-8 text", "save it as UTF-8")),
        (b"llm:\n  default: {model: x\n  bad: [\n", ("not valid YAML", "line 3")),
        (b"- a list\n", ("invalid config", "accelopt.example.yaml")),
    ],
)
def test_a_bad_config_file(run_cli, tmp_path: Path, content: bytes, parts: tuple[str]) -> None:
    path = tmp_path / "accelopt.yaml"
    path.write_bytes(content)
    assert_one_sentence(run_cli("llm", "check", "--config", path, env=WIDE), *parts)


def test_a_directory_as_the_config(run_cli, tmp_path: Path) -> None:
    out = run_cli("llm", "check", "--config", tmp_path, env=WIDE)
    assert_one_sentence(out, "config file", "is a directory", "YAML file")
    out = run_cli("optimize", "silu", "--config", tmp_path, "--workspace", tmp_path / "ws",
                  env=WIDE)  # fmt: skip
    assert_one_sentence(out, "config file", "is a directory")


def test_a_directory_to_import(run_cli, tmp_path: Path) -> None:
    out = run_cli("memory", "import", tmp_path, "--workspace", tmp_path / "ws", env=WIDE)
    assert_one_sentence(out, "is a directory")


def test_a_message_with_brackets_is_printed_as_is(run_cli) -> None:
    out = run_cli("eval", "silu", "[/bold]", env=WIDE)  # rich markup in a path
    assert_one_sentence(out, "kernel file '[/bold]' does not exist")


# -- the workspace and the cache -------------------------------------------------------------


def test_a_file_as_the_workspace(run_cli, a_file: Path) -> None:
    out = run_cli("runs", "list", "--workspace", a_file, env=WIDE)
    assert_one_sentence(out, "--workspace", "is a file, not a directory")
    out = run_cli("optimize", "silu", "--workspace", a_file, env=WIDE)
    assert_one_sentence(out, "--workspace", "is a file, not a directory")


def test_a_file_as_the_workspace_from_the_environment(run_cli, a_file: Path) -> None:
    out = run_cli("memory", "list", env={**WIDE, "ACCELOPT_WORKSPACE": str(a_file)})
    assert_one_sentence(out, "ACCELOPT_WORKSPACE", "is a file, not a directory")


def test_a_workspace_below_a_file(run_cli, a_file: Path) -> None:
    out = run_cli("runs", "list", "--workspace", a_file / "ws", env=WIDE)
    assert_one_sentence(out, "--workspace", "cannot be made")


@as_root
def test_a_read_only_workspace(run_cli, tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    assert run_cli("runs", "list", "--workspace", folder, env=WIDE).returncode == 0  # only read
    out = run_cli("optimize", "silu", "--workspace", folder, env=WIDE)
    assert_one_sentence(out, "--workspace", "is not writable")


def test_a_workspace_whose_database_is_not_one(run_cli, tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "accelopt.db").write_text("not a database, just text " * 100)
    out = run_cli("runs", "list", "--workspace", tmp_path / "ws", env=WIDE)
    assert_one_sentence(out, "is not a usable accelopt database", ".recover > dump.sql")


def test_a_file_as_the_cache_dir(run_cli, kernel: Path, a_file: Path) -> None:
    out = run_cli("eval", "silu", kernel, env={**WIDE, "ACCELOPT_CACHE_DIR": str(a_file)})
    assert_one_sentence(out, "ACCELOPT_CACHE_DIR", "it is a file")


def test_an_invalid_option_of_optimize_is_one_sentence(run_cli, tmp_path: Path) -> None:
    out = run_cli("optimize", "silu", "--workers", "0", "--workspace", tmp_path / "ws", env=WIDE)
    assert_one_sentence(out, "invalid evaluation option", "workers")


def test_an_unwritable_path_is_one_sentence_even_for_root(monkeypatch, tmp_path: Path) -> None:
    """What a read-only directory does to a user who is not root (root may write anywhere)."""
    from accelopt.cli import output

    def refuse(*args: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(output.os, "open", refuse)
    with pytest.raises(UserError, match=r"cannot be written \(Permission denied\): give a path"):
        output.check_writable(tmp_path / "x.json", "--json")
    monkeypatch.setattr(output.os, "access", lambda *args: False)
    with pytest.raises(UserError, match="Permission denied"):
        output.check_writable(tmp_path / "deep" / "x.html", "--html", make_parents=True)
