"""`accelopt serve` under connections that do not behave: a client that never finishes its request
header is answered 408 and dropped after the header timeout, connections beyond the cap are
answered 503 at once, and a thousand slow clients leave the health route answering quickly. Served
by a real uvicorn in this process with the configuration `accelopt serve` uses."""

from __future__ import annotations

import json
import socket
import statistics
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

pytest.importorskip("fastapi")

from accelopt.serve.api import Views, create_app
from accelopt.serve.jobs import EvaluationJobs
from accelopt.serve.server import Limits, fitted, raise_open_files

PARTIAL = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n"  # a header that never ends


def _app():
    jobs = EvaluationJobs(lambda name: None, lambda backend: None, capacity=1)  # type: ignore[arg-type,return-value]
    return create_app(jobs, Views(lambda: [], lambda n: {}, lambda: [], lambda r: None), None)


@pytest.fixture()
def served(serve_in_thread, request) -> Iterator[tuple[str, int]]:
    limits = getattr(request, "param", Limits())
    with serve_in_thread(_app(), limits) as url:
        yield url, int(url.rsplit(":", 1)[1])


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _health_seconds(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(f"{url}/v1/health", timeout=10) as r:
        assert r.status == 200 and json.loads(r.read())["ok"]
    return time.perf_counter() - start


def _read_to_close(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


@pytest.mark.parametrize("served", [Limits(header_timeout_s=0.5)], indirect=True)
def test_a_header_that_never_ends_is_answered_408_and_dropped(served):
    url, port = served
    with _connect(port) as silent, _connect(port) as dripping:
        start = time.monotonic()
        for byte in PARTIAL[:8]:  # one byte every 50 ms: none of them extends the deadline
            dripping.sendall(bytes([byte]))
            time.sleep(0.05)
        answers = [_read_to_close(silent), _read_to_close(dripping)]
        waited = time.monotonic() - start
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), answers
    assert b"did not arrive within 0.5 s" in answers[0]
    assert 0.4 < waited < 3
    with _connect(port) as kept:  # a client that finishes in time, then stays idle, is served
        kept.sendall(PARTIAL + b"\r\n")
        assert kept.recv(4096).startswith(b"HTTP/1.1 200 ")
    assert _health_seconds(url) < 1


@pytest.mark.parametrize("served", [Limits(max_connections=5)], indirect=True)
def test_connections_beyond_the_cap_are_answered_503_at_once(served):
    url, port = served
    with ExitStack() as stack:
        idle = [stack.enter_context(_connect(port)) for _ in range(5)]
        time.sleep(0.2)  # the server has accepted them
        with _connect(port) as extra:
            extra.sendall(PARTIAL + b"\r\n")
            answer = _read_to_close(extra)
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        assert b"retry-after: 1" in answer.lower() and b"too many open connections" in answer
        assert len(idle) == 5
    time.sleep(0.2)  # the idle ones are closed: room again
    assert _health_seconds(url) < 1


def test_too_few_open_files_lower_the_cap(monkeypatch, capsys):
    monkeypatch.setattr("accelopt.serve.server.raise_open_files", lambda wanted: 1256)
    assert fitted(Limits(max_connections=5000)).max_connections == 1000
    assert "at most 1000 open connections" in capsys.readouterr().err
    assert fitted(Limits(max_connections=500)).max_connections == 500


SLOW_CLIENTS = 1000


@pytest.mark.slow
@pytest.mark.parametrize("served", [Limits(header_timeout_s=4)], indirect=True)
def test_health_answers_quickly_while_a_thousand_slow_clients_hang_on(served):
    url, port = served
    if raise_open_files(2 * SLOW_CLIENTS + 512) < 2 * SLOW_CLIENTS + 512:  # both ends are here
        pytest.skip("the open-file limit is too low for a thousand connections and their peers")
    with ExitStack() as stack:
        clients = [stack.enter_context(_connect(port)) for _ in range(SLOW_CLIENTS)]
        opened = time.monotonic()
        timings = []
        for step in range(12):  # half send nothing, half a header a byte at a time
            for client in clients[::2]:
                client.sendall(PARTIAL[step : step + 1])
            timings.append(_health_seconds(url))
            time.sleep(0.1)
        assert statistics.median(timings) < 0.1 and max(timings) < 0.5, timings
        for client in clients:  # and every one of them is dropped at the header timeout
            client.settimeout(max(1.0, opened + 10 - time.monotonic()))
            assert _read_to_close(client).startswith(b"HTTP/1.1 408 ")
        assert time.monotonic() - opened < 8
    assert _health_seconds(url) < 0.1


def test_the_limits_are_checked_before_anything_starts():
    from accelopt.cli.serve import serve_command
    from accelopt.errors import UserError

    for bad in ({"max_connections": 0}, {"header_timeout": 0.0}):
        with pytest.raises(UserError, match="--max-connections must be at least 1"):
            serve_command(no_auth=True, **bad)  # type: ignore[arg-type]
