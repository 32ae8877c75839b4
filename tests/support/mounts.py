"""Real file systems for the tests of a full or read-only workspace: a small tmpfs, a read-only
bind mount. Both need mount (root, or a container that allows it); a test asks and skips where
it is refused. Tests run as root here, which ignores permission bits, so a chmod is no read-only
folder: a read-only mount is one for root too."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"this test needs mount (root): {done.stderr.strip()}")


def _umount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


@contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Path]:
    """``folder`` as a tmpfs of ``size`` (e.g. "512k") while in the block."""
    folder.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        _umount(folder)


def grow(disk: Path, size: str) -> None:
    """Free space on a ``small_disk``: make it ``size``."""
    _mount("-o", f"remount,size={size}", str(disk))


def fill(disk: Path, leave: int = 0) -> None:
    """Fill a disk but for ``leave`` bytes."""
    stat = os.statvfs(disk)
    with open(disk / "filler", "wb") as f:
        f.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - leave))


@contextmanager
def read_only_view(source: Path, view: Path) -> Iterator[Path]:
    """``source`` seen read-only at ``view`` (a read-only bind mount) while in the block."""
    view.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(source), str(view))
    try:
        _mount("-o", "remount,ro,bind", str(view))
        yield view
    finally:
        _umount(view)
