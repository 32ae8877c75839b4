"""A disk that refuses a write outside the store (a kernel written out, a report, the cache) as
one sentence: what failed and what to do. The store's own failures are ``StoreUnusable``s,
sentences already."""

from __future__ import annotations

import errno

_FULL = (errno.ENOSPC, errno.EDQUOT)
_AFTER = (
    "then run the command again (a run it stopped resumes with `accelopt optimize --resume "
    "RUN`: see `accelopt runs list`)"
)


def disk_sentence(exc: OSError) -> str | None:
    """The sentence for a full, read-only or failing disk; None for any other ``OSError`` (not
    the user's to mend: it stays as it is)."""
    where = f" {exc.filename}" if exc.filename else ""
    why = exc.strerror or str(exc)
    if exc.errno in _FULL:
        return f"cannot write{where} ({why}): free space there, {_AFTER}"
    if exc.errno == errno.EROFS:
        return f"cannot write{where} ({why}): make it writable or write elsewhere, {_AFTER}"
    if exc.errno == errno.EIO:
        return f"the disk failed reading or writing{where} ({why}): check it, {_AFTER}"
    return None
