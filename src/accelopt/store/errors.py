"""Errors the store raises. The ones a user can cause or mend (a database from a newer accelopt,
an ambiguous run id prefix, a full or read-only workspace, a damaged row) are ``UserError``s, so
the CLI prints their one sentence and exits with status 2."""

from __future__ import annotations

from accelopt.errors import UserError

# How to salvage a damaged database: what the sentences about one say.
SALVAGE = (
    "salvage it with `sqlite3 accelopt.db .recover > dump.sql` then `sqlite3 new.db < dump.sql` "
    "and put new.db in its place"
)


class StoreError(Exception):
    """A store operation that cannot be done as asked (unknown run, duplicate run, bad file)."""


class SchemaVersionError(StoreError, UserError):
    """The database was written by a newer accelopt whose schema this one does not know."""


class AmbiguousRunError(StoreError, UserError):
    """A run id prefix matches more than one run."""

    def __init__(self, prefix: str, matches: list[str]) -> None:
        self.prefix = prefix
        self.matches = matches
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        super().__init__(
            f"the run id prefix {prefix!r} matches {len(matches)} runs ({shown}); "
            "give more characters of the id."
        )


class StoreUnusable(StoreError, UserError):
    """The store cannot do what was asked for a reason on the user's side; its one sentence
    says what to do. What was committed before stays committed (a run stays resumable)."""


class StoreFull(StoreUnusable):
    """The workspace's disk or quota is full (SQLITE_FULL, ENOSPC, EDQUOT)."""


class StoreReadOnly(StoreUnusable):
    """The workspace (or its database file) cannot be written (SQLITE_READONLY, EROFS)."""


class StoreIOError(StoreUnusable):
    """The disk failed a read or a write (SQLITE_IOERR: a failing disk, a quota, a lost mount)."""


class StoreBusy(StoreUnusable):
    """Another process held the database's lock for longer than the store waits."""


class StoreDamaged(StoreUnusable):
    """The file is not a usable accelopt database (not SQLite, or its pages are corrupt)."""


class BadRowError(StoreDamaged):
    """One row cannot be decoded (text that is not UTF-8, JSON that does not parse): the rest of
    the store is fine. ``table`` and ``key`` name the row (``key``: its key columns, as text)."""

    def __init__(self, table: str, key: str, why: str, where: str = "the store") -> None:
        self.table = table
        self.key = key
        self.why = why
        super().__init__(
            f"the row of {table} with {key} in {where} is damaged ({why}): "
            "`accelopt store check` lists every damaged row"
        )
