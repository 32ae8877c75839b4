"""Option groups: a command's options as typed objects, one dataclass per group.

Typer reads a command's options from its function's parameters. ``with_groups`` lets a command
take whole groups instead: each parameter annotated with a dataclass marked ``@option_group``
becomes that dataclass's fields on the command line (each field an ``Annotated`` typer option
with its default, its options shown under the group's title in ``--help``), and the command is
called with one object of each group. Field names are the options' names, so they must be unique
across the groups of one command.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from typer.models import OptionInfo

R = TypeVar("R")
T = TypeVar("T")

_GROUP = "__option_group__"


def option_group(title: str) -> Callable[[type[T]], type[T]]:
    """Mark a (frozen) dataclass as a group of command-line options, shown under ``title`` in
    ``--help``."""

    def mark(cls: type[T]) -> type[T]:
        setattr(cls, _GROUP, title)
        return cls

    return mark


def _is_group(annotation: Any) -> bool:
    return isinstance(annotation, type) and bool(getattr(annotation, _GROUP, ""))


def _in_panel(annotation: Any, title: str) -> Any:
    """``Annotated[T, info]`` with a copy of the typer option ``info`` shown under ``title``
    (arguments stay in typer's own panel)."""
    if typing.get_origin(annotation) is not Annotated:
        return annotation
    base, *extras = typing.get_args(annotation)
    shown = []
    for extra in extras:
        if isinstance(extra, OptionInfo) and extra.rich_help_panel is None:
            extra = copy.copy(extra)
            extra.rich_help_panel = title
        shown.append(extra)
    return Annotated[(base, *shown)]


def _fields(group: type) -> list[inspect.Parameter]:
    hints = typing.get_type_hints(group, include_extras=True)
    title = getattr(group, _GROUP)
    return [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=_in_panel(hints[f.name], title),
            default=f.default,
        )
        for f in dataclasses.fields(group)
    ]


def with_groups(command: Callable[..., R]) -> Callable[..., R]:
    """``command`` as typer sees it: its group parameters replaced by their fields."""
    hints = typing.get_type_hints(command, include_extras=True)
    own = inspect.signature(command).parameters
    groups = {name: hints[name] for name in own if _is_group(hints.get(name))}
    params: list[inspect.Parameter] = []
    for name, param in own.items():
        if name in groups:
            params.extend(_fields(groups[name]))
        else:
            kind = inspect.Parameter.KEYWORD_ONLY  # typer calls with keywords only
            params.append(param.replace(kind=kind, annotation=hints.get(name, param.annotation)))
    names = [p.name for p in params]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TypeError(f"option {twice[0]} is in two groups of {command.__name__}")

    @functools.wraps(command)
    def wrapper(**values: Any) -> R:
        for name, group in groups.items():
            fields = {f.name: values.pop(f.name) for f in dataclasses.fields(group)}
            values[name] = group(**fields)
        return command(**values)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    del wrapper.__wrapped__  # typer must read the signature above, not the command's
    return wrapper
