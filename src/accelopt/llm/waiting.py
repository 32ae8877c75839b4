"""A call that waits long says so: one line on stderr every ``WAIT_NOTICE_S`` while it runs.

"planner: waiting 60 s for MODEL, attempt 1 of 6, timeout 600 s". stderr, so that a log of a run
without a terminal has it too (on a terminal, the live progress display prints it above itself).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable

from accelopt.llm.config import Endpoint
from accelopt.llm.tries import Tries

WAIT_NOTICE_S = 30.0  # how long a call runs before it says so, and how often it says so again


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # sys.stderr as it is now: a display may wrap it


def notice(endpoint: Endpoint, waited_s: float, tries: Tries, attempts: int) -> str:
    return (
        f"{endpoint.agent}: waiting {waited_s:.0f} s for {endpoint.model}, attempt "
        f"{max(tries.attempts, 1)} of {attempts}, timeout {endpoint.timeout_s:g} s"
    )


async def tell_while_waiting(
    say: Callable[[str], None], endpoint: Endpoint, tries: Tries, attempts: int
) -> None:
    """Say every WAIT_NOTICE_S (read at each wait, so tests can shrink it) how long the call
    has waited; runs until cancelled."""
    start = time.monotonic()
    while True:
        await asyncio.sleep(WAIT_NOTICE_S)
        say(notice(endpoint, time.monotonic() - start, tries, attempts))
