"""Moving the optimization memory between workspaces: JSON Lines, one experience a line.

Each line is one JSON object with every field of ``Experience`` (the lesson nested as an object),
as ``dataclasses.asdict`` writes it. ``id`` is written for reference and ignored on import: the
receiving store assigns its own. Importing validates the whole file before adding anything, and
skips an experience equal to one already there by (title, description, problem, fast_hash).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from accelopt.errors import UserError
from accelopt.memory.records import Experience, ExperienceKind, Lesson

KINDS = tuple(ExperienceKind)
_LESSON_FIELDS = ("title", "description", "before", "after")
_REQUIRED_LESSON = ("title", "description")
_TEXT_FIELDS = (
    "problem",
    "backend",
    "hardware",
    "model",
    "run_id",
    "slow_hash",
    "fast_hash",
)
_KNOWN = {f.name for f in dataclasses.fields(Experience)}


class ExperienceStore(Protocol):
    """The part of ``accelopt.store.Store`` that export and import use."""

    def add_experience(self, experience: Experience) -> int: ...

    def experiences(
        self, *, run_id: str | None = None, problem: str | None = None
    ) -> list[Experience]: ...


def to_json(experience: Experience) -> str:
    """One line: the experience's fields, the lesson nested."""
    return json.dumps(dataclasses.asdict(experience), ensure_ascii=False, allow_nan=False)


def export_jsonl(store: ExperienceStore, path: str | Path, *, problem: str | None = None) -> int:
    """Write the memory (only ``problem``'s experiences when given) to ``path``; the count."""
    experiences = store.experiences(problem=problem)
    try:
        with Path(path).open("w", encoding="utf-8") as f:
            for exp in experiences:
                f.write(to_json(exp) + "\n")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}.") from exc
    return len(experiences)


def duplicate_key(experience: Experience) -> tuple[str, str, str, str]:
    """Two experiences with this key equal are the same lesson about the same kernel."""
    lesson = experience.lesson
    return (lesson.title, lesson.description, experience.problem, experience.fast_hash)


def import_jsonl(store: ExperienceStore, path: str | Path) -> int:
    """Add the experiences in ``path`` to the store, skipping duplicates (of the store or of an
    earlier line); the number added. A malformed line raises ``UserError`` naming it, before
    anything is added."""
    parsed = list(read_jsonl(path))
    known = {duplicate_key(exp) for exp in store.experiences()}
    added = 0
    for exp in parsed:
        key = duplicate_key(exp)
        if key in known:
            continue
        store.add_experience(exp)
        known.add(key)
        added += 1
    return added


def read_jsonl(path: str | Path) -> Iterable[Experience]:
    """The experiences of a JSON Lines file (blank lines skipped), all validated first."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}.") from exc
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(from_json(line))
        except ValueError as exc:
            raise UserError(
                f"{path}, line {number}: {exc}; each line must be one experience as "
                "`accelopt memory export` writes it."
            ) from None
    return out


def from_json(line: str) -> Experience:
    """An ``Experience`` from one line; ``ValueError`` saying what is wrong. ``id`` is dropped."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"a JSON object was expected, not {type(data).__name__}")
    unknown = sorted(set(data) - _KNOWN)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    return Experience(
        lesson=_lesson(data.get("lesson")),
        kind=_kind(data.get("kind")),
        speedup=_speedup(data.get("speedup")),
        created_at=_text(data, "created_at", required=False),
        **{name: _text(data, name) for name in _TEXT_FIELDS},
    )


def _text(data: dict[str, Any], name: str, *, required: bool = True) -> str:
    if name not in data:
        if required:
            raise ValueError(f"the field {name!r} is missing")
        return ""
    value = data[name]
    if not isinstance(value, str):
        raise ValueError(f"the field {name!r} must be a string, not {type(value).__name__}")
    return value


def _lesson(value: Any) -> Lesson:
    if not isinstance(value, dict):
        raise ValueError("the field 'lesson' must be an object with a title and a description")
    unknown = sorted(set(value) - set(_LESSON_FIELDS))
    if unknown:
        raise ValueError(f"unknown lesson field(s) {', '.join(unknown)}")
    fields = {
        name: _text(value, name, required=name in _REQUIRED_LESSON) for name in _LESSON_FIELDS
    }
    for name in _REQUIRED_LESSON:
        if not fields[name].strip():
            raise ValueError(f"the lesson's {name} is empty")
    return Lesson(**fields)


def _kind(value: Any) -> ExperienceKind:
    if value not in KINDS:
        raise ValueError(f"the field 'kind' must be 'positive' or 'negative', not {value!r}")
    return ExperienceKind(value)


def _speedup(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"the field 'speedup' must be a number, not {value!r}")
    if not math.isfinite(value) or value <= 1.0:
        raise ValueError(f"the field 'speedup' must be a finite number > 1, not {value!r}")
    return float(value)
