"""How ``accelopt serve`` listens: uvicorn, with limits that keep it answering under load.

- **Header timeout** (``Limits.header_timeout_s``): a connection must have sent a request's whole
  header within this many seconds of opening, or of the previous response; one that sends nothing,
  or sends its header a byte at a time, is answered 408 and closed then. An idle keep-alive
  connection is closed after ``keep_alive_s`` (uvicorn's ``timeout_keep_alive``).
- **Connection cap** (``Limits.max_connections``): a connection beyond it is answered 503 with
  ``Retry-After`` at once, without its request being read, and closed; the connections already
  open are served as before.
- **Header size**: h11's limit on what it holds of an unfinished request (``max_header_bytes``);
  a larger header is answered 400.
- **Open files**: each connection is a file descriptor; ``run`` raises the soft ``RLIMIT_NOFILE``
  (up to the hard limit) so that the cap fits, and lowers the cap, saying so, where it cannot.

Everything else (one worker process, its event loop) is uvicorn's default; the application's own
limits (request body, evaluation queue) are in ``api`` and ``jobs``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from accelopt.errors import UserError

OPEN_FILES_RESERVE = 256  # descriptors kept for the store, the profilers' workers, logs


@dataclass(frozen=True)
class Limits:
    header_timeout_s: float = 10.0
    max_connections: int = 2048
    keep_alive_s: int = 5
    max_header_bytes: int = 16 * 1024


def _canned(status: str, detail: str, extra: str = "") -> bytes:
    body = json.dumps({"detail": detail}).encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n"
    )
    return head.encode() + body


_Base: Any = AutoHTTPProtocol  # h11, or httptools where it is installed: both have what is used


class GuardedHTTP(_Base):  # type: ignore[misc]
    """uvicorn's HTTP/1.1 protocol with the header deadline and the connection cap of ``limits``
    (a subclass per server sets them: ``guarded``)."""

    limits: ClassVar[Limits] = Limits()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._header_deadline: asyncio.TimerHandle | None = None
        self._refused = False
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse()
        else:
            self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self._refused:  # already answered 503: what it sent is dropped, and so is it
            self.transport.close()
            return
        super().data_received(data)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_deadline()  # the next request's header has the same time

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _refuse(self) -> None:
        self._refused = True
        detail = "the server has too many open connections: try again shortly"
        self.transport.write(_canned("503 Service Unavailable", detail, "retry-after: 1\r\n"))
        # Closed when its request comes (read first, so the client reads the answer, not a
        # reset), or after a second.
        self._header_deadline = self.loop.call_later(1.0, self.transport.close)

    def _arm_header_deadline(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(
            self.limits.header_timeout_s, self._header_timed_out
        )

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _header_timed_out(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return  # closed, or handed over (a WebSocket upgrade)
        if self.cycle is None or self.cycle.response_complete:  # no request under way
            seconds = f"{self.limits.header_timeout_s:g}"
            detail = f"the request header did not arrive within {seconds} s"
            self.transport.write(_canned("408 Request Timeout", detail))
            self.transport.close()


def guarded(limits: Limits) -> type[asyncio.Protocol]:
    """The protocol class of one server: ``GuardedHTTP`` with ``limits``."""
    return type("GuardedHTTP", (GuardedHTTP,), {"limits": limits})


def server_config(app: Any, host: str, port: int, limits: Limits) -> uvicorn.Config:
    """The uvicorn configuration of ``accelopt serve`` (the tests serve with it too)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        http=guarded(limits),
        timeout_keep_alive=limits.keep_alive_s,
        h11_max_incomplete_event_size=limits.max_header_bytes,
    )


def raise_open_files(wanted: int) -> int:
    """Raise the soft limit on open files towards ``wanted`` (never past the hard limit, never
    lowering it); the soft limit now. Where there is no such limit, ``wanted``."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return wanted if soft == resource.RLIM_INFINITY else soft


def fitted(limits: Limits) -> Limits:
    """``limits`` with a connection cap the open-file limit holds (raised for it if it can be);
    a line on standard error where the cap had to come down."""
    available = raise_open_files(limits.max_connections + OPEN_FILES_RESERVE) - OPEN_FILES_RESERVE
    if available >= limits.max_connections:
        return limits
    cap = max(16, available)
    print(
        f"accelopt serve: at most {cap} open connections, not {limits.max_connections}: the "
        "limit on open files (ulimit -n) is too low for more",
        file=sys.stderr,
        flush=True,
    )
    return replace(limits, max_connections=cap)


def run(app: Any, host: str, port: int, limits: Limits) -> None:
    """Serve ``app`` until interrupted (as ``uvicorn.run`` does, with ``limits``)."""
    server = uvicorn.Server(server_config(app, host, port, fitted(limits)))
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        raise UserError(f"the server did not start on {host}:{port} (uvicorn's error above)")
