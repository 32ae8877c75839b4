"""Finding the damaged rows of a store: text that is not UTF-8, JSON that does not parse, a value
its record cannot take. ``accelopt store check`` reads every row of every table this way; the
store itself asks for the rows of one column when a query met an undecodable value, so that the
error it raises names the row (table and key).

Every value is read as bytes (``CAST(... AS BLOB)``) and decoded here: SQLite hands Python a
column's text only by decoding it, which is what fails on a damaged row."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from accelopt.llm.records import LLMCall
from accelopt.memory.records import ExperienceKind
from accelopt.profiling.evaluation import stored as stored_evaluation
from accelopt.store.records import KernelOrigin, RunStatus

# The columns that hold JSON, per table.
JSON_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("config",),
    "run_kernels": ("plan_steps",),
    "evaluations": ("data",),
    "llm_calls": ("data",),
    "iterations": ("data",),
    "retrievals": ("ids",),
    "retimings": ("kernels", "data"),
    "run_references": ("data",),
}
# The columns a record reads as a model or an enum: a value it cannot take is a damaged row.
_MODELS: dict[tuple[str, str], Callable[[str], Any]] = {
    ("evaluations", "data"): stored_evaluation,
    ("llm_calls", "data"): LLMCall.model_validate_json,
    ("run_references", "data"): stored_evaluation,
}
_ENUMS: dict[tuple[str, str], type[StrEnum]] = {
    ("runs", "status"): RunStatus,
    ("run_kernels", "origin"): KernelOrigin,
    ("experiences", "kind"): ExperienceKind,
}


@dataclass(frozen=True)
class BadRow:
    """A row that cannot be read: its table, its key (``col='value'``, ...) and why."""

    table: str
    key: str
    why: str

    def as_json(self) -> dict[str, str]:
        return {"table": self.table, "key": self.key, "why": self.why}


def quick_check(conn: sqlite3.Connection) -> list[str]:
    """What ``PRAGMA quick_check`` finds wrong with the file's pages (empty: nothing)."""
    found = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
    return [] if found == ["ok"] else found


def tables(conn: sqlite3.Connection) -> list[str]:
    """The tables whose rows are records: full-text indexes and SQLite's own are left out (the
    index of experiences is made from them)."""
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " ORDER BY name"
    ).fetchall()
    virtual = [str(r[0]) for r in rows if str(r[1] or "").upper().startswith("CREATE VIRTUAL")]
    return [
        str(r[0])
        for r in rows
        if str(r[0]) not in virtual and not any(str(r[0]).startswith(v + "_") for v in virtual)
    ]


def bad_rows(conn: sqlite3.Connection, column: str | None = None) -> Iterator[BadRow]:
    """Every damaged row, table by table; with ``column``, only the text of that column (in the
    tables that have it) is checked."""
    for table in tables(conn):
        columns = [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]
        if column is not None:
            if column not in columns:
                continue
            columns = [column]
        yield from _table_bad_rows(conn, table, columns, deep=column is None)


def _table_bad_rows(
    conn: sqlite3.Connection, table: str, columns: list[str], deep: bool
) -> Iterator[BadRow]:
    info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    keys = [str(r[1]) for r in sorted(info, key=lambda r: int(r[5])) if int(r[5]) > 0] or ["rowid"]
    text = {str(r[1]) for r in info if str(r[2]).upper() == "TEXT"}  # declared TEXT
    selected = ", ".join([*map(_key_value, keys), *(f'CAST("{c}" AS BLOB)' for c in columns)])
    types = ", ".join(f'typeof("{c}")' for c in columns)
    cursor = conn.execute(f'SELECT {selected}, {types} FROM "{table}"')
    cursor.row_factory = None  # plain tuples, whatever the connection's factory
    for row in cursor:
        key = ", ".join(f"{k}={_shown(v)}" for k, v in zip(keys, row, strict=False))
        values = row[len(keys) : len(keys) + len(columns)]
        kinds = row[len(keys) + len(columns) :]
        for name, raw, kind in zip(columns, values, kinds, strict=True):
            if kind == "blob" and name in text:
                why: str | None = f"{name} holds bytes, not text"
            else:
                why = _why_bad(table, name, raw, kind, deep)
            if why is not None:
                yield BadRow(table, key, why)
                break


def _why_bad(table: str, column: str, raw: bytes | None, kind: str, deep: bool) -> str | None:
    """Why one value cannot be read (None: it can)."""
    if kind != "text" or raw is None:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"{column} is not UTF-8 text: an invalid byte at offset {exc.start}"
    if not deep:
        return None
    try:
        if column in JSON_COLUMNS.get(table, ()):
            json.loads(text)
        if (table, column) in _MODELS:
            _MODELS[table, column](text)
        if (table, column) in _ENUMS:
            _ENUMS[table, column](text)
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"{column} cannot be read: {first[:120]}"
    return None


def _key_value(column: str) -> str:
    """A key column as SQL selects it: text as its bytes (a damaged key is shown, not raised),
    numbers as they are."""
    quoted = f'"{column}"'
    return f"CASE WHEN typeof({quoted}) = 'text' THEN CAST({quoted} AS BLOB) ELSE {quoted} END"


def _shown(value: object) -> str:
    """A key value as the sentence shows it: text quoted (bytes that are not UTF-8 replaced)."""
    if isinstance(value, bytes):
        return repr(value.decode("utf-8", errors="replace")[:80])
    return repr(value)
