"""The store's connection and its transactions: the base every table group of ``Store`` builds on.

Durability: WAL journal, ``synchronous = FULL``, and every write method is one transaction
(``BEGIN IMMEDIATE`` ... ``COMMIT``) committed before it returns, so a process killed right after a
call returns loses nothing. Other processes may use the same file; they wait up to 10 s for a lock.
``transaction()`` makes several writes one transaction (a write inside it joins it).

Failures are the store's own errors (``errors.StoreUnusable``, one sentence each: a full,
read-only or failing disk, a damaged row), never sqlite3's. A write that fails is rolled back
whole, so a run stays as its last committed step left it: ``running``, and resumable. Once a
write failed for the disk's sake, marking a run failed is not tried (``RunTables.update_run``).

A store opened with ``open_readonly`` never writes, never creates the file, and works on a
read-only workspace (``connect.connect_readonly``).

Threads: the store holds one connection (``check_same_thread=False``) and serializes every use of
it with a re-entrant lock, so one ``Store`` can be shared by all threads of a process. SQLite
admits one writer at a time anyway; reads are short.
"""

from __future__ import annotations

import datetime
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self, TypeVar

import pydantic_core
from pydantic import BaseModel

from accelopt.store.check import BadRow, bad_rows, quick_check, tables
from accelopt.store.connect import connect, connect_readonly
from accelopt.store.errors import (
    BadRowError,
    StoreError,
    StoreFull,
    StoreIOError,
    StoreReadOnly,
    StoreUnusable,
)
from accelopt.store.failures import translate

T = TypeVar("T")

DB_NAME = "accelopt.db"
log = logging.getLogger(__name__)


def now_iso() -> str:
    """The current time, ISO 8601 in UTC to the second (as ``LLMCall.started_at``)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def dump_json(data: BaseModel | Any) -> str:
    """A model (or plain data) as JSON with ``NaN``/``Infinity`` constants, so that a
    ``max_rel_err`` of ``inf`` survives the round trip where ``model_dump_json`` writes null."""
    plain = data.model_dump() if isinstance(data, BaseModel) else data
    return pydantic_core.to_json(plain, inf_nan_mode="constants").decode()


class Database:
    """One SQLite file and the lock around its connection."""

    def __init__(self, path: Path, readonly: bool = False) -> None:
        """Open the database file at ``path`` (created if absent; its folder must exist); with
        ``readonly``, only read (never created: a missing file is an empty store)."""
        self.path = Path(path)
        self.readonly = readonly
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = (
            connect_readonly(self.path) if readonly else connect(self.path)
        )
        self._conn.row_factory = sqlite3.Row
        self._run_hint: str | None = None  # the run the last write was for (how to resume it)
        self._disk_failure: StoreUnusable | None = None  # a write the disk refused

    @classmethod
    def open(cls, workspace: Path) -> Self:
        """The store of ``workspace``: creates the folder and ``accelopt.db`` when absent."""
        workspace = Path(workspace)
        workspace.mkdir(parents=True, exist_ok=True)
        return cls(workspace / DB_NAME)

    @classmethod
    def open_readonly(cls, workspace: Path) -> Self:
        """The store of ``workspace`` for reading only: nothing is created or written."""
        return cls(Path(workspace) / DB_NAME, readonly=True)

    def close(self) -> None:
        """Close the connection; closing twice is harmless, using a closed store is an error."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transactions -------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the store {self.path} is closed")
        return self._conn

    @contextmanager
    def _translated(self, conn: sqlite3.Connection) -> Iterator[None]:
        """sqlite3's errors inside as the store's (``failures.translate``); one the user cannot
        mend (a bug) stays as it is."""
        try:
            yield
        except sqlite3.Error as exc:
            found = translate(exc, self.path, self._run_hint, lambda c: _first_bad(conn, c))
            if found is None:
                raise
            if isinstance(found, StoreFull | StoreReadOnly | StoreIOError):
                self._disk_failure = found
            raise found from exc

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed on exit (rolled back on an exception, a failed
        commit too); inside ``transaction()``, a part of that one."""
        with self._lock:
            conn = self._connection()
            if conn.in_transaction:
                yield conn
                return
            with self._translated(conn):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    _roll_back(conn)
                    raise

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Several calls as one transaction: what they write is committed together on exit, or
        not at all; what they read inside sees what was written before it."""
        with self._write():
            yield

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connection()
            with self._translated(conn):
                yield conn

    @contextmanager
    def _row(self, table: str, key: str) -> Iterator[None]:
        """Decoding one row of ``table``: a value its record cannot take (JSON that does not
        parse, an unknown status, text that is not text) is a ``BadRowError`` naming it."""
        try:
            yield
        except (ValueError, TypeError, KeyError) as exc:
            why = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else repr(exc)
            raise BadRowError(table, key, why, where=str(self.path)) from exc

    def _decoded(
        self,
        table: str,
        rows: Iterable[sqlite3.Row],
        key: Callable[[sqlite3.Row], str],
        decode: Callable[[sqlite3.Row], T],
    ) -> list[T]:
        """Each of ``rows`` of ``table`` decoded (a damaged one: ``_row``'s error, by its key)."""
        found = []
        for row in rows:
            with self._row(table, key(row)):
                found.append(decode(row))
        return found

    def check(self) -> tuple[list[str], list[str], list[BadRow]]:
        """The store read whole: what ``PRAGMA quick_check`` finds wrong with its pages, the
        tables read, and every damaged row (``check.bad_rows``)."""
        with self._read() as conn:
            return quick_check(conn), tables(conn), list(bad_rows(conn))

    @contextmanager
    def _write_run(self, run_id: str) -> Iterator[sqlite3.Connection]:
        """A write transaction on a run's rows; a run not in the store is a ``StoreError``."""
        self._run_hint = run_id
        with self._write() as conn:
            self._require_run(conn, run_id)
            yield conn

    @staticmethod
    def _require_run(conn: sqlite3.Connection, run_id: str) -> None:
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise StoreError(f"no run with id {run_id!r} in the store")


def _roll_back(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if any (a failed COMMIT leaves it open); a rollback that
    fails too leaves the error that made it to be told."""
    if not conn.in_transaction:
        return
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        log.debug("rollback failed", exc_info=True)


def _first_bad(conn: sqlite3.Connection, column: str) -> tuple[str, str, str] | None:
    """The first row whose ``column`` is not UTF-8 text (table, key, why), or None."""
    try:
        for bad in bad_rows(conn, column):
            return bad.table, bad.key, bad.why
    except sqlite3.Error:
        log.debug("looking for the damaged row failed", exc_info=True)
    return None
