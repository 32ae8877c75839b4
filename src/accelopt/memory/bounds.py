"""Bounds on a lesson's text: what a lesson may hold once imported or shown in a prompt.

A lesson is data, written by a model in this workspace or by anyone in a shared JSONL file, so
its text is bounded and cleaned before it is stored (``transfer.import_jsonl``) and again before a
prompt shows it (``agents/lessons.py``: a store written before these bounds may hold more):

- **Length**: a title at most ``MAX_TITLE_CHARS`` (200), a description and each code snippet
  (before, after) at most ``MAX_TEXT_CHARS`` (4096, a few paragraphs or some 100 lines of code),
  a provenance field (problem, backend, hardware, model, run id, hashes) at most
  ``MAX_FIELD_CHARS`` (200). Longer text is cut and ends with ``TRUNCATED``, inside the bound.
- **Control characters**: terminal escape sequences (ESC and 8-bit CSI/OSC/DCS... with their
  parameters and payload) are removed whole; then every other C0 and C1 control character and
  DEL, and the bidirectional-override characters, are removed. CR LF and a lone CR become LF, as
  do the Unicode line and paragraph separators. Descriptions and snippets keep LF and TAB; a title
  and a provenance field are one line (LF and TAB become a space).

Every function here is pure, and bounding twice gives what bounding once gave.
"""

from __future__ import annotations

import re

from accelopt.memory.records import Lesson

MAX_TITLE_CHARS = 200
MAX_TEXT_CHARS = 4096
MAX_FIELD_CHARS = 200
TRUNCATED = " [... truncated by accelopt]"

# An escape sequence as a terminal reads it: CSI (ESC [ or 0x9B, parameters, intermediates, a
# final byte), a string (OSC ESC ], DCS ESC P, SOS ESC X, PM ESC ^, APC ESC _, or their 8-bit
# forms) up to BEL or ST (ESC \ or 0x9C) or the end, or ESC with intermediates and a final byte.
_ESCAPE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
_NEWLINE = re.compile(r"\r\n?|[\u2028\u2029\x85]")
# C0 but TAB and LF, DEL, C1; the bidirectional marks, embeddings, overrides and isolates.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAK = re.compile(r"[\t\n]+")


def clean(text: str, *, multiline: bool) -> str:
    """``text`` without escape sequences and control characters (see the module doc); one line
    unless ``multiline``, stripped of surrounding blanks then."""
    text = _CONTROL.sub("", _NEWLINE.sub("\n", _ESCAPE.sub("", text)))
    if multiline:
        return text
    return _LINE_BREAK.sub(" ", text).strip()


def truncate(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its start followed by
    ``TRUNCATED``, ``limit`` characters in all."""
    if len(text) <= limit:
        return text
    return text[: max(limit - len(TRUNCATED), 0)].rstrip() + TRUNCATED


def bound(text: str, limit: int, *, multiline: bool) -> str:
    """``text`` cleaned, then truncated to ``limit`` characters."""
    return truncate(clean(text, multiline=multiline), limit)


def bound_title(title: str) -> str:
    return bound(title, MAX_TITLE_CHARS, multiline=False)


def bound_field(value: str) -> str:
    """A provenance field: one line, at most ``MAX_FIELD_CHARS``."""
    return bound(value, MAX_FIELD_CHARS, multiline=False)


def bound_text(text: str) -> str:
    """A description or a code snippet: lines kept, at most ``MAX_TEXT_CHARS``."""
    return bound(text, MAX_TEXT_CHARS, multiline=True)


def bound_lesson(lesson: Lesson) -> Lesson:
    """The lesson with every text field bounded."""
    return Lesson(
        title=bound_title(lesson.title),
        description=bound_text(lesson.description),
        before=bound_text(lesson.before),
        after=bound_text(lesson.after),
    )
