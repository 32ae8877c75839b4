"""Tunables: parameters a kernel declares with the values worth trying, in its own source.

A C kernel declares one as a macro it only defines when nobody did before, with its candidate
values in a comment on the same line; the file stays valid C on its own::

    #ifndef BM
    #define BM 64 /* tune: 32 64 128 */
    #endif

A Triton (Python) kernel declares one as a module-level constant::

    BLOCK_M = 64  # tune: 32 64 128

A *variant* sets some of them. In C it is the source with a block of ``#define`` lines in front
(every tunable is behind ``#ifndef``, so the block wins in every branch of the file, as ``-D``
flags would); in Python each declaring line gets the variant's value. Values are integer literals
or identifiers (``_MM_HINT_T0``): never an expression, so a value cannot smuggle code in.
Everything here is a pure function of the source.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import accelopt.backends.registry as registry

MAX_VALUES = 16  # per tunable
_VALUE = r"-?[0-9]+|[A-Za-z_][A-Za-z0-9_]*"
_C_DECLARATION = re.compile(
    r"^[ \t]*#[ \t]*ifndef[ \t]+(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]*\n"
    r"[ \t]*#[ \t]*define[ \t]+(?P=name)[ \t]+(?P<value>\S+)[ \t]*"
    r"/\*[ \t]*tune:(?P<values>[^*]*)\*/[^\n]*\n"
    r"[ \t]*#[ \t]*endif",
    re.MULTILINE,
)
_PY_DECLARATION = re.compile(
    r"^(?P<name>[A-Z_][A-Z0-9_]*)[ \t]*=[ \t]*(?P<value>\S+)[ \t]*#[ \t]*tune:(?P<values>[^\n]*)$",
    re.MULTILINE,
)
_BLOCK_START = "/* accelopt tuned values: */\n"
_BLOCK_END = "/* end of tuned values */\n"
_C_BLOCK = re.compile(re.escape(_BLOCK_START) + r"(?:#define [^\n]*\n)*" + re.escape(_BLOCK_END))


class TunableError(ValueError):
    """A declaration that cannot be used (a value that is not a literal, too many values)."""


@dataclass(frozen=True)
class Tunable:
    """One declared parameter: its default (the value the source defines) and its candidates."""

    name: str
    default: str
    values: tuple[str, ...]


def language_of(backend: str) -> str:
    """The declaration syntax of a backend's kernels: its record's language (``registry.py``)."""
    found = registry.known(backend)
    return str(found.language if found is not None else registry.Language.C)


def find_tunables(source: str, language: str = "c") -> list[Tunable]:
    """The tunables ``source`` declares, in order of first declaration (a name declared in
    several branches, e.g. one per ISA, is one tunable: its values in order of appearance, its
    default the first declaration's). A TunableError for a declaration that cannot be used."""
    pattern = _PY_DECLARATION if language == "python" else _C_DECLARATION
    found: dict[str, Tunable] = {}
    for match in pattern.finditer(_without_block(source)):
        name, default = match["name"], match["value"]
        values = tuple(match["values"].split())
        for value in (default, *values):
            if not re.fullmatch(_VALUE, value):
                raise TunableError(f"tunable {name}: {value!r} is not an integer or a name")
        if not values:
            raise TunableError(f"tunable {name} lists no value after 'tune:'")
        if name in found:
            known = found[name]
            merged = known.values + tuple(v for v in values if v not in known.values)
            found[name] = Tunable(name, known.default, merged)
        else:
            found[name] = Tunable(name, default, tuple(dict.fromkeys(values)))
        if len(found[name].values) > MAX_VALUES:
            raise TunableError(f"tunable {name} lists more than {MAX_VALUES} values")
    return list(found.values())


def _without_block(source: str) -> str:
    return _C_BLOCK.sub("", source, count=1)


def values_of(source: str, tunables: Sequence[Tunable], language: str = "c") -> dict[str, str]:
    """The value each tunable has in ``source``: a variant's, else its default."""
    chosen = {t.name: t.default for t in tunables}
    if language == "python":
        for match in _PY_DECLARATION.finditer(source):
            if match["name"] in chosen:
                chosen[match["name"]] = match["value"]
        return chosen
    block = _C_BLOCK.search(source)
    if block is not None:
        for line in block.group(0).splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "#define" and parts[1] in chosen:
                chosen[parts[1]] = parts[2]
    return chosen


def render(source: str, values: Mapping[str, str], language: str = "c") -> str:
    """``source`` with ``values`` set (a variant); the untouched declarations keep their
    candidates, so a variant declares the same tunables as the kernel it came from."""
    for name, value in values.items():
        if not re.fullmatch(_VALUE, value) or not re.fullmatch(_VALUE, name):
            raise TunableError(f"tunable {name}: {value!r} is not an integer or a name")
    if language == "python":
        return _render_python(source, values)
    defines = "".join(f"#define {name} {value}\n" for name, value in sorted(values.items()))
    body = _without_block(source)
    return f"{_BLOCK_START}{defines}{_BLOCK_END}{body}" if defines else body


def _render_python(source: str, values: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        value = values.get(match["name"], match["value"])
        return f"{match['name']} = {value}  # tune:{match['values']}"

    return _PY_DECLARATION.sub(one, source)


def label(values: Mapping[str, str]) -> str:
    """A variant's values in one line: ``BM=32 BN=64``."""
    return " ".join(f"{k}={v}" for k, v in sorted(values.items()))


def product_size(tunables: Sequence[Tunable]) -> int:
    size = 1
    for t in tunables:
        size *= len(set(t.values) | {t.default})
    return size


def _choices(t: Tunable) -> tuple[str, ...]:
    return tuple(dict.fromkeys((t.default, *t.values)))


def sweep(
    tunables: Sequence[Tunable],
    current: Mapping[str, str],
    limit: int,
    seed: int,
    tried: frozenset[str] = frozenset(),
) -> list[dict[str, str]]:
    """At most ``limit`` variants to try from ``current`` (the values of the kernel being tuned),
    none in ``tried`` (their ``label``s) nor ``current`` itself. The whole product when it fits;
    else first every single-parameter move from ``current`` (the nearest values first), then
    variants drawn at random from the rest of the product (``seed``: the same draw every time,
    so that a resumed run tries the same ones)."""
    skip = set(tried) | {label(current)}
    if product_size(tunables) <= limit + len(skip):
        everything = [
            dict(zip([t.name for t in tunables], combo, strict=True))
            for combo in itertools.product(*(_choices(t) for t in tunables))
        ]
        return [v for v in everything if label(v) not in skip][:limit]
    chosen: list[dict[str, str]] = []
    for variant in _moves(tunables, current):
        if len(chosen) >= limit:
            return chosen
        if label(variant) not in skip:
            skip.add(label(variant))
            chosen.append(variant)
    rng = random.Random(seed)
    attempts = 0
    while len(chosen) < limit and attempts < 50 * limit:
        attempts += 1
        variant = {t.name: rng.choice(_choices(t)) for t in tunables}
        if label(variant) not in skip:
            skip.add(label(variant))
            chosen.append(variant)
    return chosen


def _moves(tunables: Sequence[Tunable], current: Mapping[str, str]) -> list[dict[str, str]]:
    """Every variant that changes one parameter of ``current``, ordered by how far the new
    value is from the current one in its list (neighbours first)."""
    moves: list[tuple[int, int, dict[str, str]]] = []
    for order, t in enumerate(tunables):
        choices = list(t.values) if current[t.name] in t.values else list(_choices(t))
        here = choices.index(current[t.name]) if current[t.name] in choices else 0
        for i, value in enumerate(choices):
            if value != current[t.name]:
                moves.append((abs(i - here), order, {**current, t.name: value}))
    return [v for _, _, v in sorted(moves, key=lambda m: (m[0], m[1]))]


def base(source: str, language: str = "c") -> str:
    """``source`` with its tuned values taken out: the same for a kernel and all its variants
    (C: without the block of tuned values; Python: every declared value blanked)."""
    if language == "python":
        return _PY_DECLARATION.sub(lambda m: f"{m['name']} = ?  # tune:{m['values']}", source)
    return _without_block(source)
