"""Before work starts: the folders a command will write (the workspace, the cache's folders) can
be written and hold a little free space. A run that would fill its disk half-way is stopped
before it spends anything; the one sentence names the folder and what to do."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from accelopt import settings
from accelopt.store.errors import StoreFull, StoreReadOnly

MIN_FREE_BYTES = 64 << 20  # what a run's store, compiled kernels and references need, at least
EVAL_FREE_BYTES = 1 << 20  # what ``eval`` and ``bench run`` need: a few kernels compiled
# The folders accelopt keeps under the cache directory (``settings.cache_dir()``).
CACHE_FOLDERS = (
    "kernels",
    "kernel-host",
    "hardware",
    "locks",
    "microbench",
    "problems",
    "references",
)
_FULL = (errno.ENOSPC, errno.EDQUOT)


@dataclass(frozen=True)
class Place:
    """A folder a command writes: how the sentence names it, and what to do about it."""

    folder: Path
    what: str  # "the workspace", "the cache folder"
    remedy: str  # e.g. "give another directory with --workspace"


def workspace_place(workspace: Path) -> Place:
    return Place(workspace, "the workspace", "give another directory with --workspace")


def cache_places() -> list[Place]:
    """The cache directory and those of its folders that exist."""
    root = settings.cache_dir()
    remedy = "set ACCELOPT_CACHE_DIR to a directory you can write"
    folders = [root, *(root / name for name in CACHE_FOLDERS if (root / name).is_dir())]
    return [Place(folder, "the cache folder", remedy) for folder in folders]


def check_writable(places: Sequence[Place], need_bytes: int | None = None) -> None:
    """Each folder made when missing, a file written there and removed, and ``need_bytes``
    (default ``MIN_FREE_BYTES``) free on its file system; else a ``StoreReadOnly`` or
    ``StoreFull`` naming the folder."""
    need_bytes = MIN_FREE_BYTES if need_bytes is None else need_bytes
    for place in places:
        _probe(place)
        free = _free_bytes(place.folder)
        if free is not None and free < need_bytes:
            raise StoreFull(
                f"{place.what} {place.folder} has {_mib(free)} free, under the "
                f"{_mib(need_bytes)} this command needs: free space there or {place.remedy}"
            )


def check_run_space(workspace: Path, need_bytes: int | None = None) -> None:
    """``check_writable`` for what a run writes: its workspace and the cache's folders."""
    check_writable([workspace_place(workspace), *cache_places()], need_bytes)


def _probe(place: Place) -> None:
    """Write one small file in the folder and remove it; an error says what stops it."""
    try:
        place.folder.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=".accelopt-probe-", dir=place.folder)
        try:
            os.write(handle, b"accelopt")
            os.fsync(handle)
        finally:
            os.close(handle)
            os.unlink(name)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno in _FULL:
            raise StoreFull(
                f"{place.what} {place.folder} is full ({why}): free space there, then run the "
                f"command again, or {place.remedy}"
            ) from None
        raise StoreReadOnly(
            f"{place.what} {place.folder} cannot be written ({why}): make it writable or "
            f"{place.remedy}"
        ) from None


def _free_bytes(folder: Path) -> int | None:
    """The bytes an unprivileged user may still write on ``folder``'s file system (None: the
    system does not say)."""
    try:
        stats = os.statvfs(folder)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def _mib(count: int) -> str:
    return f"{count / (1 << 20):.1f} MiB" if count < 10 << 20 else f"{count >> 20} MiB"
