"""Errors the store raises. The ones a user can cause (a database from a newer accelopt, an
ambiguous run id prefix) are ``UserError``s, so the CLI prints their one sentence."""

from __future__ import annotations

from accelopt.errors import UserError


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
