"""A scripted OpenAI-compatible chat-completions server for tests.

No LLM endpoint is reachable from the test machines, so every LLM test talks to a
:class:`ScriptedServer` on ``127.0.0.1`` through the real ``openai`` client over real HTTP.
Tests script replies per model (FIFO), including faults (rate limits, server errors, slow,
malformed or truncated bodies), and read back the requests the client sent.

Stdlib only: ``http.server.ThreadingHTTPServer`` speaking HTTP/1.1 with keep-alive. The
scripting rules (``Reply``, which reply a request gets, the completion body) live in
``testing.scripting`` and are shared with the in-process
``testing.scripted_chat.ScriptedChat``, so the two answer alike; they are importable from here.

Example::

    with ScriptedServer(default=Reply("ok")) as server:
        server.script("m", Reply.rate_limited(), Reply("```c\\nint x;\\n```"))
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        ...
        assert server.requests_for("m")[0].body["temperature"] == 0.2
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType
from typing import Any

from accelopt.testing.scripting import (
    DEFAULT_MODEL,
    RecordedRequest,
    Reply,
    ReplySource,
    Script,
    completion_body,
    error_body,
    usage,
)

__all__ = ["DEFAULT_MODEL", "RecordedRequest", "Reply", "ReplySource", "ScriptedServer"]

_STREAM_PIECES = 4


class ScriptedServer(Script):
    """An OpenAI-compatible chat-completions server that answers from a script.

    ``POST /v1/chat/completions`` takes the next scripted reply for the request's model,
    else ``default``, else answers 500 "no scripted reply for model '<m>'". With ``api_key``
    set, a request without ``Authorization: Bearer <api_key>`` gets 401 (it is still
    recorded, but consumes no scripted reply). ``GET /v1/models`` lists scripted models.
    """

    def __init__(self, default: ReplySource | None = None, api_key: str | None = None) -> None:
        super().__init__(default)
        self.api_key = api_key
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        """Bind 127.0.0.1 on a free port and serve from a background thread."""
        if self._httpd is not None:
            raise RuntimeError("ScriptedServer is already running")
        self._stopping.clear()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler, owner=self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-llm-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the port and drop open connections; idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # wakes replies sleeping on delay_s
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            _shutdown_quietly(conn)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (only while running)."""
        if self._httpd is None:
            raise RuntimeError("ScriptedServer is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, for ``openai.OpenAI(base_url=...)``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- used by the handler -----------------------------------------------------------

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        return self.api_key is None or headers.get("authorization") == f"Bearer {self.api_key}"


# -- streaming --------------------------------------------------------------------------


def _pieces(text: str, n: int = _STREAM_PIECES) -> list[str]:
    """``text`` cut into at most ``n`` consecutive non-empty pieces."""
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chunks(cid: str, request: RecordedRequest, reply: Reply) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed reply."""
    include_usage = bool((request.body.get("stream_options") or {}).get("include_usage"))
    base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time())}
    base["model"] = request.model
    if include_usage:
        base["usage"] = None

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return {**base, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.reasoning or ""):
        yield chunk({"reasoning_content": piece})
    for piece in _pieces(reply.content):
        yield chunk({"content": piece})
    yield chunk({}, reply.finish_reason)
    if include_usage:
        yield {**base, "choices": [], "usage": usage(request, reply)}


# -- HTTP -------------------------------------------------------------------------------


def _shutdown_quietly(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type, *, owner: ScriptedServer):
        self.owner = owner
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up (timeouts, cancelled tasks) are expected; stay quiet."""
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        with self.server.owner._lock:
            self.server.owner._connections.add(self.connection)

    def finish(self) -> None:
        with self.server.owner._lock:
            self.server.owner._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """No request logging."""

    # -- routing ---------------------------------------------------------------------

    def do_GET(self) -> None:
        if self._route() != "/v1/models":
            return self._send_json(404, error_body(404))
        if not self.server.owner._authorized(self._headers()):
            return self._send_json(401, error_body(401))
        models = self.server.owner.models()
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in models]
        return self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        body = self._read_body()
        if self._route() != "/v1/chat/completions":
            return self._send_json(404, error_body(404))
        if not isinstance(body, dict):
            return self._send_json(400, error_body(400, "request body is not a JSON object"))
        self._chat_completion(body)

    def _not_found(self) -> None:
        self._read_body()
        self._send_json(404, error_body(404))

    do_PUT = do_DELETE = do_PATCH = _not_found

    # -- chat completions ------------------------------------------------------------

    def _chat_completion(self, body: dict[str, Any]) -> None:
        owner = self.server.owner
        request = owner.receive(body, self._headers(), self.path)
        if not owner._authorized(request.headers):
            return self._send_json(401, error_body(401))
        reply = owner.next_reply(request)
        if reply.delay_s > 0 and owner._stopping.wait(reply.delay_s):
            self.close_connection = True  # the server is stopping: hang up without answering
            return None
        if reply.raw_body is not None:
            kind = "text/event-stream" if body.get("stream") else "application/json"
            return self._send(reply.status, reply.raw_body.encode(), kind, reply.headers)
        if reply.status != 200:
            return self._send_json(reply.status, error_body(reply.status, reply.content), reply)
        if body.get("stream"):
            return self._stream(request, reply)
        return self._send_json(200, completion_body(owner.next_id(), request, reply), reply)

    def _stream(self, request: RecordedRequest, reply: Reply) -> None:
        """Server-sent events in HTTP/1.1 chunked transfer encoding (keeps the connection)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        events = [json.dumps(c) for c in _chunks(self.server.owner.next_id(), request, reply)]
        for data in [*events, "[DONE]"]:
            payload = f"data: {data}\n\n".encode()
            self._write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self._write(b"0\r\n\r\n")

    # -- plumbing --------------------------------------------------------------------

    def _route(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def _headers(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _send_json(self, status: int, payload: Any, reply: Reply | None = None) -> None:
        headers = reply.headers if reply is not None else MappingProxyType({})
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def _send(self, status: int, data: bytes, kind: str, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self._write(data)

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
