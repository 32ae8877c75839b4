"""Ctrl-C during a run: say "stopping…" at once, cancel the search, stop the evaluations in
flight, and leave the run resumable.

asyncio's own SIGINT handling cancels the main task too, but says nothing, and the caller cannot
tell an interrupted search from a cancelled one. Here the first SIGINT prints one line and
cancels the search; the loop's handler is removed at once, so a second Ctrl-C raises
``KeyboardInterrupt`` wherever the process is (the way to force it).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

STOPPING = (
    "stopping… (Ctrl-C again to force): the evaluations in flight are dropped, "
    "what was measured is kept"
)


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C: its record says ``interrupted`` and it can be resumed."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id


class _Stopped(Exception):
    """Raised out of the event loop (a plain exception: asyncio passes it through unchanged)."""


async def interruptible(work: Awaitable[T], say: Callable[[str], None]) -> T:
    """``work``'s result; on SIGINT, ``say`` is told ``STOPPING`` and ``work`` is cancelled, and
    ``_Stopped`` is raised once its cancellation has unwound. Where the loop cannot take signals
    (not the main thread), ``work`` is awaited as it is."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    stopped: list[bool] = []

    def on_sigint() -> None:
        if stopped:
            return
        stopped.append(True)
        loop.remove_signal_handler(signal.SIGINT)  # the next Ctrl-C raises KeyboardInterrupt
        say(STOPPING)
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or no signals
        return await work
    try:
        return await work
    except asyncio.CancelledError:
        if stopped:
            raise _Stopped from None
        raise
    finally:
        if not stopped:
            with contextlib.suppress(ValueError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)


def run_interruptible(
    work: Callable[[], Awaitable[T]], say: Callable[[str], None], run_id: str
) -> T:
    """``asyncio.run`` of ``work()``, a Ctrl-C turned into ``RunInterrupted(run_id)``."""
    try:
        return asyncio.run(interruptible(work(), say))
    except _Stopped:
        raise RunInterrupted(run_id) from None
