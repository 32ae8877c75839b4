"""One timing at a time per device: a file lock shared by all worker processes on a machine.

Building and checking take the lock shared (many at once); timing takes it exclusive, so a timed
kernel has the device to itself and nobody compiles beside it. The OS drops the lock when a holder
dies, so a killed worker never leaves the device locked.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path


@contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def shared(path: Path) -> AbstractContextManager[None]:
    return _flock(path, fcntl.LOCK_SH)


def exclusive(path: Path) -> AbstractContextManager[None]:
    return _flock(path, fcntl.LOCK_EX)


def lock_path(backend: str) -> Path:
    """The lock file of the device a backend's kernels run on (one CPU, or one GPU, per machine)."""
    from accelopt import settings

    return settings.cache_dir() / "locks" / f"{backend}.lock"
