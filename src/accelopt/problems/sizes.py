"""Workloads: sizes bound to a name, and the workloads a user names by their sizes.

Besides a problem's named workloads (``cpu``, ``paper``, ...), ``M=512,N=768,K=384`` names the
workload of exactly those sizes: every size parameter of the problem, each a positive integer, in
any order, without spaces. Its canonical name lists them in the problem's ``params`` order, so
two spellings are one workload (what a run's spec and the caches store).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

VALUE = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Workload:
    """Sizes bound to a name: ``paper`` (the published sizes) or ``cpu`` (sized for a small CPU),
    or the sizes themselves (``M=512,N=768,K=384``: ``sized_workload``)."""

    name: str
    sizes: Mapping[str, int]


def sized_name(params: Sequence[str], sizes: Mapping[str, int]) -> str:
    """The canonical name of the workload of ``sizes``: ``P=V`` in ``params`` order."""
    return ",".join(f"{p}={int(sizes[p])}" for p in params)


def is_sized(name: str) -> bool:
    """Whether ``name`` is written as sizes (``M=512,...``) rather than a workload's name."""
    return "=" in name


def sized_workload(
    params: Sequence[str], name: str, *, owner: str = "the problem", example: str = ""
) -> Workload | None:
    """The workload ``name`` gives the sizes of (``M=512,N=768,K=384``), under its canonical
    name; None when ``name`` is no list of sizes (a named workload). A KeyError, one sentence
    saying what to give, when it misses a parameter, names an unknown one or one twice, or gives
    one a value that is not a positive integer. ``owner`` and ``example`` (a valid name) make
    that sentence concrete."""
    if not is_sized(name):
        return None
    sizes: dict[str, int] = {}
    for part in name.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key:
            wrong = f"is not a list of NAME=VALUE separated by commas (at {part!r})"
        elif key not in params:
            wrong = f"names {key!r}, which is no size parameter"
        elif key in sizes:
            wrong = f"names {key} twice"
        elif not VALUE.fullmatch(value) or int(value) <= 0:
            wrong = f"gives {key} the value {value!r}, not a positive integer"
        else:
            sizes[key] = int(value)
            continue
        raise KeyError(_sentence(params, name, wrong, owner, example))
    missing = [p for p in params if p not in sizes]
    if missing:
        raise KeyError(_sentence(params, name, f"misses {', '.join(missing)}", owner, example))
    return Workload(sized_name(params, sizes), {p: sizes[p] for p in params})


def _sentence(params: Sequence[str], name: str, wrong: str, owner: str, example: str) -> str:
    form = example or ",".join(f"{p}=..." for p in params)
    return (
        f"workload {name!r} {wrong}: give every size parameter of {owner} "
        f"({', '.join(params)}) as a positive integer, e.g. {form}"
    )
