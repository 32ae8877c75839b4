"""A command's options as typed groups: typer sees each group's fields as options (under the
group's title), and the command gets one object per group."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from accelopt.cli.groups import option_group, with_groups


@option_group("Sizes")
@dataclass(frozen=True)
class Sizes:
    rows: Annotated[int, typer.Option(help="rows")] = 2
    cols: Annotated[int, typer.Option(help="columns")] = 3


@option_group("Naming")
@dataclass(frozen=True)
class Naming:
    names: Annotated[list[str] | None, typer.Argument(help="names")] = None
    upper: Annotated[bool, typer.Option("--upper", help="shout")] = False


seen: list[tuple[Sizes, Naming, str]] = []


@with_groups
def command(sizes: Sizes, naming: Naming, tag: Annotated[str, typer.Option()] = "t") -> None:
    seen.append((sizes, naming, tag))


def test_the_command_gets_one_object_per_group():
    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, ["a", "b", "--rows", "5", "--upper", "--tag", "x"])
    assert result.exit_code == 0, result.output
    assert seen[-1] == (Sizes(rows=5), Naming(names=["a", "b"], upper=True), "x")
    shown = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100"}).output
    assert "Sizes" in shown and "Naming" in shown and "--cols" in shown


@option_group("Again")
@dataclass(frozen=True)
class Again:
    rows: int = 1


def clash(sizes: Sizes, again: Again) -> None: ...


def test_an_option_in_two_groups_is_refused():
    with pytest.raises(TypeError, match="option rows is in two groups"):
        with_groups(clash)
