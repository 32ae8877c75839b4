"""The API under test in this process: a real uvicorn in a thread, on a free loopback port, with
the configuration of ``accelopt serve`` (``serve.server.server_config``)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest


@contextmanager
def _in_thread(app: Any, limits: Any = None) -> Iterator[str]:
    import uvicorn

    from accelopt.serve.server import Limits, server_config

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(server_config(app, "127.0.0.1", port, limits or Limits()))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="session")
def serve_in_thread() -> Callable[[Any], AbstractContextManager[str]]:
    """``with serve_in_thread(app) as base_url: ...``; ``serve_in_thread(app, Limits(...))`` for
    other limits than the defaults."""
    return _in_thread
