"""Opening the store's file: for writing (``connect``: WAL, the schema created or upgraded) or
for reading only (``connect_readonly``: never a write, never a new file, a read-only workspace
too).

A read-only connection opens the file with ``mode=ro``. In a folder it cannot write (read-only
or full), SQLite cannot make the WAL's shared-memory file: a database closed cleanly (no ``-wal``
file) is then read as ``immutable`` (nothing else writes it there), and one with a ``-wal`` file
(its writer was killed) is read from a copy of both made in a temporary folder. A database of an
older schema is copied into memory and upgraded there; a missing one is an empty store in memory.
The file itself is never changed."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import urllib.parse
from pathlib import Path

from accelopt.store.failures import damaged, translate
from accelopt.store.schema import SCHEMA_VERSION, ensure_schema, stored_version, too_new

BUSY_TIMEOUT_MS = 10_000


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the database at ``path``: WAL, foreign keys, busy timeout,
    autocommit mode (the store opens its own transactions), schema created or checked. A file
    that cannot be opened is a ``StoreUnusable`` (full, read-only, damaged: one sentence)."""
    conn: sqlite3.Connection | None = None
    try:
        conn = _open(str(path))
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        ensure_schema(conn, path)
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        raise (translate(exc, path) or damaged(path, exc)) from exc
    except BaseException:
        if conn is not None:
            conn.close()
        raise
    return conn


def connect_readonly(path: Path) -> sqlite3.Connection:
    """The database at ``path`` opened for reading only (see the module's text); writing through
    it fails (SQLITE_READONLY)."""
    if not path.exists():
        return _fresh(path)
    try:
        conn = _readable(path)
        version = stored_version(conn)
    except sqlite3.Error as exc:
        raise (translate(exc, path) or damaged(path, exc)) from exc
    if version is None:  # an empty file: no store yet
        conn.close()
        return _fresh(path)
    if version > SCHEMA_VERSION:
        conn.close()
        raise too_new(path, version)
    if version < SCHEMA_VERSION:
        conn = _upgraded_copy(conn, path)
    conn.execute("PRAGMA query_only = ON")
    return conn


def _open(target: str, uri: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(
        target,
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,
        check_same_thread=False,
        uri=uri,
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _uri(path: Path, *options: str) -> str:
    return f"file:{urllib.parse.quote(str(path.resolve()))}?{'&'.join(('mode=ro', *options))}"


def _readable(path: Path) -> sqlite3.Connection:
    """``path`` with ``mode=ro``; where the WAL's files cannot be made, immutable or a copy."""
    conn = _open(_uri(path), uri=True)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code not in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR):
            raise
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return _from_copy(path, wal)
    conn = _open(_uri(path, "immutable=1"), uri=True)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return conn


def _from_copy(path: Path, wal: Path) -> sqlite3.Connection:
    """The database and its WAL copied to a temporary folder, read there into memory."""
    with tempfile.TemporaryDirectory(prefix="accelopt-store-") as folder:
        copy = Path(folder) / path.name
        shutil.copyfile(path, copy)
        shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        source = _open(str(copy))
        try:
            return _into_memory(source)
        finally:
            source.close()


def _into_memory(source: sqlite3.Connection) -> sqlite3.Connection:
    memory = _open(":memory:")
    source.backup(memory)
    return memory


def _upgraded_copy(conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    """An older schema's database copied into memory and upgraded there (the file unchanged)."""
    try:
        memory = _into_memory(conn)
    finally:
        conn.close()
    try:
        ensure_schema(memory, path)
    except sqlite3.Error as exc:
        memory.close()
        raise damaged(path, exc) from exc
    return memory


def _fresh(path: Path) -> sqlite3.Connection:
    """No store at ``path`` yet: an empty one in memory, so that reading it finds nothing."""
    memory = _open(":memory:")
    ensure_schema(memory, path)
    memory.execute("PRAGMA query_only = ON")
    return memory
