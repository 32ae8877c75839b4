"""sqlite3's errors as the store's own: a full, read-only or failing disk, a lock held too long, a
damaged file or row, each one sentence that says what to do (``errors.StoreUnusable``).

SQLite reports ENOSPC as SQLITE_FULL; EDQUOT and a failing disk as SQLITE_IOERR; a read-only file
system or file as SQLITE_READONLY (or SQLITE_CANTOPEN when the journal cannot be made). A row
whose text is not UTF-8 is Python's own error ("Could not decode to UTF-8 column 'x'"), named
here by looking for the damaged row (``check.bad_rows``)."""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

from accelopt.store.errors import (
    SALVAGE,
    BadRowError,
    StoreBusy,
    StoreDamaged,
    StoreFull,
    StoreIOError,
    StoreReadOnly,
    StoreUnusable,
)

_ROOM = 1 << 20  # under this much free, an I/O error is taken for a full disk
_UNDECODABLE = re.compile(r"Could not decode to UTF-8 column '([^']*)'")
# A function that names the first damaged row with text in this column (None: found none).
RowFinder = Callable[[str], "tuple[str, str, str] | None"]


def then_resume(run_id: str | None) -> str:
    """What to run once the cause is mended: resume the run the store was writing for, if any."""
    if run_id:
        return f"then `accelopt optimize --resume {run_id}`"
    return "then run the command again"


def translate(
    exc: sqlite3.Error, path: Path, run_id: str | None = None, find_row: RowFinder | None = None
) -> StoreUnusable | None:
    """The store's error for ``exc`` (raised on the database at ``path``), or None for an error
    that is not the user's to mend (a bug: it stays as it is). ``run_id``: the run the store was
    writing for, which a full or read-only workspace tells how to resume."""
    folder = path.parent
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    then = then_resume(run_id)
    if primary == sqlite3.SQLITE_FULL or (primary == sqlite3.SQLITE_IOERR and _no_room(folder)):
        return StoreFull(f"the workspace {folder} is full (its disk or quota): free space, {then}")
    if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN):
        return StoreReadOnly(read_only_sentence(folder, then))
    if primary == sqlite3.SQLITE_IOERR:
        return StoreIOError(
            f"the disk of the workspace {folder} failed a read or a write ({exc}: a full disk or "
            f"quota, or a failing disk): free space or check the disk, {then}"
        )
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreBusy(
            f"the store {path} stayed locked by another accelopt process: wait until it is "
            "done, then run the command again"
        )
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return damaged(path, exc)
    found = _UNDECODABLE.search(str(exc))
    if found is not None:
        row = find_row(found.group(1)) if find_row is not None else None
        if row is not None:
            return BadRowError(*row, where=str(path))
        return StoreDamaged(
            f"a row of {path} is damaged (its {found.group(1)} is not UTF-8 text): "
            "`accelopt store check` lists every damaged row"
        )
    return None


def _no_room(folder: Path) -> bool:
    """Whether ``folder``'s disk is (all but) full: an I/O error there is a full disk's (SQLite
    says SQLITE_IOERR when its shared-memory file cannot grow, EDQUOT likewise)."""
    try:
        stats = os.statvfs(folder)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < _ROOM


def read_only_sentence(folder: Path, then: str) -> str:
    return (
        f"the workspace {folder} cannot be written (read-only): make it writable or copy it and "
        f"give the copy with --workspace, {then} (`accelopt runs list`, `runs show` and "
        "`report` read it as it is)"
    )


def damaged(path: Path, exc: BaseException) -> StoreDamaged:
    """The sentence for a file SQLite cannot use as a database: how to salvage what it holds."""
    return StoreDamaged(f"{path} is not a usable accelopt database ({exc}): {SALVAGE}")
