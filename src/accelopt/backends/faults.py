"""Failures that are the machine's, not the kernel's: a build that could not write for want of
disk, quota or permission. Such a build is not a COMPILE_ERROR the kernel earned: the evaluation
could not be done (``KernelMeasurement.service``), is retried, and is never cached or ranked.

The compiler's words are not trusted for this (a kernel's ``#line`` directive can make gcc print
any file name): a failed build is the machine's only when the folders it writes to cannot take a
file of ``PROBE_BYTES`` now, checked after its own files are gone.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

SERVICE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EIO}
)
PROBE_BYTES = 16 << 20  # a large kernel object, with room to spare


def os_fault(exc: OSError, what: str) -> str:
    """The sentence for an OSError of the machine's (one of ``SERVICE_ERRNOS``) while ``what``;
    "" for any other."""
    if exc.errno not in SERVICE_ERRNOS:
        return ""
    where = f" ({exc.filename})" if exc.filename else ""
    reason = os.strerror(exc.errno or 0)
    return f"{what} failed: {reason}{where}: the machine's disk, not the kernel"


def unwritable(folders: Iterable[Path], probe_bytes: int = PROBE_BYTES) -> str:
    """Why one of ``folders`` cannot take a file of ``probe_bytes`` now, or "" when all can."""
    for folder in folders:
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".accelopt-probe-") as probe:
                os.posix_fallocate(probe.fileno(), 0, probe_bytes)
        except OSError as exc:
            found = os_fault(exc, f"writing {probe_bytes >> 20} MiB in {folder}")
            if found:
                return found
    return ""
