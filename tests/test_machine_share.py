"""The lock that lets a test marked ``alone`` run while no other does under pytest-xdist
(tests/support/alone.py): exclusive against shared holders, and not starved by them."""

from __future__ import annotations

import fcntl
import threading
import time
from collections.abc import Callable
from pathlib import Path

from alone import machine_share


def hold(
    folder: Path, alone: bool, name: str, order: list[str], release: threading.Event
) -> threading.Thread:
    def run() -> None:
        with machine_share(folder, alone):
            order.append(name)
            release.wait(10)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def wait_until(what: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def turnstile_held(folder: Path) -> bool:
    """Whether someone holds the turnstile (an alone holder waiting for the shared ones)."""
    with (folder / "turnstile.lock").open("a") as gate:
        try:
            fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(gate, fcntl.LOCK_UN)
        return False


def test_an_alone_holder_waits_for_the_shared_ones_and_goes_before_later_ones(tmp_path):
    order: list[str] = []
    first, alone, later = threading.Event(), threading.Event(), threading.Event()
    threads = [hold(tmp_path, False, "shared", order, first)]
    wait_until(lambda: order == ["shared"])
    threads.append(hold(tmp_path, True, "alone", order, alone))
    wait_until(lambda: turnstile_held(tmp_path))  # it waits, holding the turnstile
    threads.append(hold(tmp_path, False, "later", order, later))
    time.sleep(0.3)
    assert order == ["shared"]  # the alone one waits for it, the later one waits behind
    first.set()
    wait_until(lambda: len(order) == 2)
    time.sleep(0.1)
    assert order == ["shared", "alone"]  # the later shared one did not slip in before it
    alone.set()
    later.set()
    for thread in threads:
        thread.join(10)
    assert order == ["shared", "alone", "later"]


def test_shared_holders_do_not_wait_for_each_other(tmp_path):
    order: list[str] = []
    release = threading.Event()
    threads = [hold(tmp_path, False, f"shared {i}", order, release) for i in range(3)]
    wait_until(lambda: len(order) == 3)
    assert sorted(order) == ["shared 0", "shared 1", "shared 2"]
    release.set()
    for thread in threads:
        thread.join(10)
