"""The device lock between processes: timing (exclusive) waits for nobody else and makes everyone
wait; building and checking (shared) run side by side. Orderings only, no absolute timings."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from accelopt.hardware import devicelock

WAIT_S = 30.0  # generous: only reached when something is broken
# fork: the children run only the lock and the events (a spawned child could not import this
# module, which pytest loads from its path, not from a package on sys.path).
CTX = multiprocessing.get_context("fork")


def hold(path: str, mode: str, held, release) -> None:
    """Take the lock, say so, and keep it until told to let go."""
    lock = devicelock.exclusive if mode == "exclusive" else devicelock.shared
    with lock(Path(path)):
        held.set()
        release.wait(WAIT_S)


def take(path: str, mode: str, trying, acquired, holder_released, saw_release) -> None:
    """Take the lock; record whether the holder had already let go when we got it."""
    lock = devicelock.exclusive if mode == "exclusive" else devicelock.shared
    trying.set()
    with lock(Path(path)):
        saw_release.value = int(holder_released.is_set())
        acquired.set()


def start(target, *args):
    process = CTX.Process(target=target, args=args, daemon=True)
    process.start()
    return process


def run_pair(
    path: Path, holder_mode: str, taker_mode: str, patience: float = 1.0
) -> tuple[bool, bool]:
    """Whether the taker got in within ``patience`` while the holder held the lock, and whether
    the holder had been told to let go when the taker got in."""
    held, release = CTX.Event(), CTX.Event()
    trying, acquired, saw_release = CTX.Event(), CTX.Event(), CTX.Value("i", -1)
    holder = start(hold, str(path), holder_mode, held, release)
    assert held.wait(WAIT_S), "the holder never got the lock"
    taker = start(take, str(path), taker_mode, trying, acquired, release, saw_release)
    try:
        assert trying.wait(WAIT_S), "the second process never started"
        got_in_while_held = acquired.wait(patience)
        release.set()
        assert acquired.wait(WAIT_S), "the second process never got the lock"
    finally:
        release.set()
        holder.join(WAIT_S)
        taker.join(WAIT_S)
    assert holder.exitcode == 0 and taker.exitcode == 0
    return got_in_while_held, bool(saw_release.value)


@pytest.mark.timeout(120)
def test_shared_waits_for_exclusive(tmp_path):
    got_in, after_release = run_pair(tmp_path / "locks" / "cpu.lock", "exclusive", "shared")
    assert not got_in
    assert after_release  # it got the lock only once the exclusive holder let go


@pytest.mark.timeout(120)
def test_exclusive_waits_for_shared(tmp_path):
    got_in, after_release = run_pair(tmp_path / "cpu.lock", "shared", "exclusive")
    assert not got_in
    assert after_release


@pytest.mark.timeout(120)
def test_shared_holders_run_side_by_side(tmp_path):
    got_in, after_release = run_pair(tmp_path / "cpu.lock", "shared", "shared", patience=WAIT_S)
    assert got_in
    assert not after_release  # it got in while the first still held the lock


@pytest.mark.timeout(120)
def test_a_killed_holder_releases_the_lock(tmp_path):
    path = tmp_path / "cpu.lock"
    held, release = CTX.Event(), CTX.Event()
    holder = start(hold, str(path), "exclusive", held, release)
    assert held.wait(WAIT_S)
    holder.kill()
    holder.join(WAIT_S)
    with devicelock.exclusive(path):  # would block forever if the dead holder kept it
        pass
