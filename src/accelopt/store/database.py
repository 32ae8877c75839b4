"""The store's connection and its transactions: the base every table group of ``Store`` builds on.

Durability: WAL journal, ``synchronous = FULL``, and every write method is one transaction
(``BEGIN IMMEDIATE`` ... ``COMMIT``) committed before it returns, so a process killed right after a
call returns loses nothing. Other processes may use the same file; they wait up to 10 s for a lock.
``transaction()`` makes several writes one transaction (a write inside it joins it).

Threads: the store holds one connection (``check_same_thread=False``) and serializes every use of
it with a re-entrant lock, so one ``Store`` can be shared by all threads of a process. SQLite
admits one writer at a time anyway; reads are short.
"""

from __future__ import annotations

import datetime
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import pydantic_core
from pydantic import BaseModel

from accelopt.store.errors import StoreError
from accelopt.store.schema import connect

DB_NAME = "accelopt.db"


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

    def __init__(self, path: Path) -> None:
        """Open the database file at ``path`` (created if absent; its folder must exist)."""
        self.path = Path(path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = connect(self.path)
        self._conn.row_factory = sqlite3.Row

    @classmethod
    def open(cls, workspace: Path) -> Self:
        """The store of ``workspace``: creates the folder and ``accelopt.db`` when absent."""
        workspace = Path(workspace)
        workspace.mkdir(parents=True, exist_ok=True)
        return cls(workspace / DB_NAME)

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
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed on exit (rolled back on an exception); inside
        ``transaction()``, a part of that one."""
        with self._lock:
            conn = self._connection()
            if conn.in_transaction:
                yield conn
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Several calls as one transaction: what they write is committed together on exit, or
        not at all; what they read inside sees what was written before it."""
        with self._write():
            yield

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._connection()

    @contextmanager
    def _write_run(self, run_id: str) -> Iterator[sqlite3.Connection]:
        """A write transaction on a run's rows; a run not in the store is a ``StoreError``."""
        with self._write() as conn:
            self._require_run(conn, run_id)
            yield conn

    @staticmethod
    def _require_run(conn: sqlite3.Connection, run_id: str) -> None:
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise StoreError(f"no run with id {run_id!r} in the store")
