"""Moving the optimization memory between workspaces: JSON Lines, one experience a line.

Each line is one JSON object with every field of ``Experience`` (the lesson nested as an object),
as ``dataclasses.asdict`` writes it. ``id``, ``iteration``, ``parent_hash``, ``plan_title`` and
``measured_here`` are written for reference and ignored on import: the receiving store assigns
its own id, and an imported lesson is never ``measured_here``: its speedup is the exporter's
claim, which retrieval does not rank by and the planner is told is one.

A shared file is data from someone else, so importing it is bounded line by line:

- a line whose text is too long or holds control characters is imported with its text bounded
  (``memory/bounds.py``: titles 200 characters, descriptions and snippets 4096, escape sequences
  and control characters removed), and the report names its line and what was changed;
- a malformed line is refused and named with its reason: not JSON, not an object, an unknown or
  missing field, a field of the wrong type, an empty title or description, a kind other than
  positive/negative, a speedup that is not a finite number > 1 or is over
  ``MAX_CLAIMED_SPEEDUP`` (1000x: no change to one kernel is that, it is a broken measurement or
  a lure);
- the other lines are added, but for those equal to one already there (or to an earlier line)
  by (title, description, problem, fast_hash), which are skipped.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from accelopt.errors import UserError
from accelopt.memory.bounds import TRUNCATED, bound_field, bound_lesson
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
MAX_CLAIMED_SPEEDUP = 1000.0  # a claimed speedup above this is refused, not imported
_SHOWN = 40  # a refused value is echoed in the report cut to this many characters


@dataclass(frozen=True)
class LineNote:
    """What became of one line of an imported file (its number counts from 1)."""

    line: int
    text: str


@dataclass(frozen=True)
class ImportReport:
    added: int
    duplicates: int  # lines equal to a lesson already there, or to an earlier line
    refused: tuple[LineNote, ...] = ()  # malformed lines, not imported: why
    bounded: tuple[LineNote, ...] = ()  # imported lines whose text was cut or cleaned: how


@dataclass(frozen=True)
class Parsed:
    """One well-formed line: its experience (bounded), and what bounding changed."""

    line: int
    experience: Experience
    changes: tuple[str, ...] = ()


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


def import_jsonl(store: ExperienceStore, path: str | Path) -> ImportReport:
    """Add the well-formed experiences of ``path`` to the store, bounded and marked as claims
    (not ``measured_here``), skipping duplicates (of the store or of an earlier line); what was
    added, skipped, refused and bounded. An unreadable file raises ``UserError``."""
    parsed, refused = read_jsonl(path)
    known = {duplicate_key(exp) for exp in store.experiences()}
    added = duplicates = 0
    for item in parsed:
        key = duplicate_key(item.experience)
        if key in known:
            duplicates += 1
            continue
        store.add_experience(item.experience)
        known.add(key)
        added += 1
    bounded = tuple(LineNote(p.line, "; ".join(p.changes)) for p in parsed if p.changes)
    return ImportReport(added, duplicates, tuple(refused), bounded)


def read_jsonl(path: str | Path) -> tuple[list[Parsed], list[LineNote]]:
    """The well-formed lines of a JSON Lines file (blank lines skipped), and the refused ones
    with their reasons."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}.") from exc
    parsed: list[Parsed] = []
    refused: list[LineNote] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = _decode(line)
            experience = _experience(data)
        except ValueError as exc:
            refused.append(LineNote(number, str(exc)))
            continue
        parsed.append(Parsed(number, experience, _changes(data, experience)))
    return parsed, refused


def from_json(line: str) -> Experience:
    """An imported ``Experience`` from one line, its text bounded, not ``measured_here``;
    ``ValueError`` saying what is wrong. ``id`` and the run's own fields are dropped."""
    return _experience(_decode(line))


def _decode(line: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError("not valid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise ValueError(f"a JSON object was expected, not {type(data).__name__}")
    unknown = sorted(set(data) - _KNOWN)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(_shown(k) for k in unknown[:3])}")
    return data


def _experience(data: dict[str, Any]) -> Experience:
    return Experience(
        lesson=bound_lesson(_lesson(data.get("lesson"))),
        kind=_kind(data.get("kind")),
        speedup=_speedup(data.get("speedup")),
        created_at=bound_field(_text(data, "created_at", required=False)),
        measured_here=False,
        **{name: bound_field(_text(data, name)) for name in _TEXT_FIELDS},
    )


def _changes(data: dict[str, Any], experience: Experience) -> tuple[str, ...]:
    """What bounding changed: "description truncated from 9000 characters", "title cleaned"."""
    lesson = experience.lesson
    given = {**{name: data.get(name, "") for name in _TEXT_FIELDS}, **data["lesson"]}
    kept = {name: getattr(experience, name) for name in _TEXT_FIELDS}
    kept |= {name: getattr(lesson, name) for name in _LESSON_FIELDS}
    out = []
    for name, value in kept.items():
        raw = given.get(name, "")
        if value == raw:
            continue
        cut = len(raw) > len(value) and value.endswith(TRUNCATED)
        out.append(f"{name} truncated from {len(raw)} characters" if cut else f"{name} cleaned")
    return tuple(out)


def _shown(value: Any) -> str:
    """A value from the file as a report echoes it: repr'd (controls escaped), cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


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
        raise ValueError(f"unknown lesson field(s) {', '.join(_shown(k) for k in unknown[:3])}")
    fields = {
        name: _text(value, name, required=name in _REQUIRED_LESSON) for name in _LESSON_FIELDS
    }
    for name in _REQUIRED_LESSON:
        if not fields[name].strip():
            raise ValueError(f"the lesson's {name} is empty")
    return Lesson(**fields)


def _kind(value: Any) -> ExperienceKind:
    if value not in KINDS:
        raise ValueError(f"the field 'kind' must be 'positive' or 'negative', not {_shown(value)}")
    return ExperienceKind(value)


def _speedup(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"the field 'speedup' must be a number, not {_shown(value)}")
    try:
        speedup = float(value)
    except OverflowError:
        speedup = math.inf
    if not math.isfinite(speedup) or speedup <= 1.0:
        raise ValueError(f"the field 'speedup' must be a finite number > 1, not {_shown(value)}")
    if speedup > MAX_CLAIMED_SPEEDUP:
        raise ValueError(
            f"the claimed speedup {speedup:.3g}x is over {MAX_CLAIMED_SPEEDUP:.0f}x, not credible"
        )
    return speedup
