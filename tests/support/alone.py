"""Tests whose figures need the machine to themselves, when the suite runs in several processes
(pytest-xdist, the README's ``pytest -n 2``): a test marked ``alone`` holds an exclusive lock on
a file all the workers share, and every other test a shared one, so an ``alone`` test runs while
no other test does. A turnstile stops the shared holders from starving it: whoever wants the
lock passes the turnstile first, and an ``alone`` test waits for the last shared holder while
holding the turnstile, so no new test starts in the meantime. In one process nothing waits."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def machine_share(folder: Path, alone: bool) -> Iterator[None]:
    """Hold the machine: alone (an exclusive lock) or beside other tests (a shared one)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "turnstile.lock").open("a") as gate, (folder / "machine.lock").open("a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
