"""A scripted OpenAI-compatible chat-completions server for tests.

No LLM endpoint is reachable from the test machines, so every LLM test talks to a
:class:`ScriptedServer` on ``127.0.0.1`` through the real ``openai`` client over real HTTP.
Tests script replies per model (FIFO), including faults (rate limits, server errors, slow,
malformed or truncated bodies), and read back the requests the client sent.

Stdlib only: ``http.server.ThreadingHTTPServer`` speaking HTTP/1.1 with keep-alive.

Example::

    with ScriptedServer(default=Reply("ok")) as server:
        server.script("m", Reply.rate_limited(), Reply("```c\\nint x;\\n```"))
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        ...
        assert server.requests_for("m")[0].body["temperature"] == 0.2
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType, TracebackType
from typing import Any

__all__ = ["DEFAULT_MODEL", "RecordedRequest", "Reply", "ReplySource", "ScriptedServer"]

DEFAULT_MODEL = "scripted-default"
"""Listed by ``GET /v1/models`` next to the scripted models."""

_STREAM_PIECES = 4
_ERRORS: dict[int, tuple[str, str | None, str]] = {
    # status: (error type, error code, default message)
    400: ("invalid_request_error", None, "Bad request (scripted)."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided (scripted)."),
    403: ("permission_error", None, "Permission denied (scripted)."),
    404: ("invalid_request_error", "not_found", "Not found (scripted)."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached (scripted)."),
}


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a chat-completions request.

    ``status != 200`` answers with an OpenAI-style error body whose message is ``content``
    (or a default for the status); ``raw_body`` is sent as-is, bypassing everything else
    except ``status``, ``headers`` and ``delay_s``.
    """

    content: str = ""
    reasoning: str | None = None
    """Returned as ``message["reasoning_content"]`` (vLLM/DeepSeek style) when set."""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw_body: str | None = None
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    """Usage override; by default one per whitespace-separated word, plus one per message."""
    completion_tokens: int | None = None
    """Usage override; by default the words in content and reasoning (at least 1)."""

    @classmethod
    def rate_limited(cls, retry_after_s: float = 0.05) -> Reply:
        """429 with a ``retry-after`` header (seconds)."""
        return cls(status=429, headers={"retry-after": f"{retry_after_s:g}"})

    @classmethod
    def server_error(cls, status: int = 500) -> Reply:
        """A 5xx error body."""
        return cls(status=status)

    @classmethod
    def unauthorized(cls) -> Reply:
        """401 with code ``invalid_api_key``."""
        return cls(status=401)

    @classmethod
    def slow(cls, content: str, delay_s: float) -> Reply:
        """A normal reply sent after ``delay_s`` seconds."""
        return cls(content=content, delay_s=delay_s)

    @classmethod
    def empty(cls) -> Reply:
        """A well-formed completion with empty content."""
        return cls(content="")

    @classmethod
    def malformed(cls) -> Reply:
        """200 with ``application/json`` but a body that is not valid JSON."""
        return cls(raw_body='{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [')

    @classmethod
    def truncated(cls, content: str) -> Reply:
        """The first half of ``content`` with finish_reason ``length``."""
        return cls(content=content[: len(content) // 2], finish_reason="length")

    @classmethod
    def huge(cls, n_bytes: int = 2_000_000) -> Reply:
        """Content of exactly ``n_bytes`` ASCII characters (words of filler)."""
        filler = "lorem ipsum dolor sit amet "
        return cls(content=(filler * (n_bytes // len(filler) + 1))[:n_bytes])

    @classmethod
    def no_code(cls, text: str = "I would restructure the loops, but here is no code.") -> Reply:
        """Prose without any fenced code block."""
        return cls(content=text)


@dataclass(frozen=True)
class RecordedRequest:
    """A chat-completions request as the server received it."""

    model: str
    messages: list[dict]
    body: dict
    """The whole JSON body (temperature, max_tokens, reasoning_effort, stream, ...)."""
    headers: dict[str, str]
    """Header names lower-cased."""
    path: str
    at: float
    """``time.monotonic()`` at arrival."""


ReplySource = Reply | Callable[[RecordedRequest], Reply]
"""A reply, or a function of the request that makes one."""


class ScriptedServer:
    """An OpenAI-compatible chat-completions server that answers from a script.

    ``POST /v1/chat/completions`` takes the next scripted reply for the request's model,
    else ``default``, else answers 500 "no scripted reply for model '<m>'". With ``api_key``
    set, a request without ``Authorization: Bearer <api_key>`` gets 401 (it is still
    recorded, but consumes no scripted reply). ``GET /v1/models`` lists scripted models.
    """

    def __init__(self, default: ReplySource | None = None, api_key: str | None = None) -> None:
        self.default = default
        self.api_key = api_key
        self._lock = threading.Lock()
        self._scripts: dict[str, deque[ReplySource]] = {}
        self._requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)
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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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

    # -- script and log ----------------------------------------------------------------

    def script(self, model: str, *replies: ReplySource) -> None:
        """Append replies to ``model``'s FIFO."""
        with self._lock:
            self._scripts.setdefault(model, deque()).extend(replies)

    def pending(self, model: str | None = None) -> int:
        """Scripted replies not consumed yet, for ``model`` or over all models."""
        with self._lock:
            queues = self._scripts.values() if model is None else [self._scripts.get(model, ())]
            return sum(len(q) for q in queues)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the chat-completions requests received, in arrival order."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, model: str) -> list[RecordedRequest]:
        """The recorded requests for ``model``, in arrival order."""
        return [r for r in self.requests if r.model == model]

    def models(self) -> list[str]:
        """Every model ever scripted, then ``DEFAULT_MODEL``."""
        with self._lock:
            return [*self._scripts, DEFAULT_MODEL]

    # -- used by the handler -----------------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            queue = self._scripts.get(request.model)
            source = queue.popleft() if queue else self.default
        if source is None:
            return Reply(status=500, content=f"no scripted reply for model '{request.model}'")
        if isinstance(source, Reply):
            return source
        try:
            return source(request)
        except Exception as exc:  # a test bug: answer loudly rather than hang up
            return Reply(status=500, content=f"scripted reply callable raised {exc!r}")

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        return self.api_key is None or headers.get("authorization") == f"Bearer {self.api_key}"

    def _next_id(self) -> str:
        with self._lock:
            return f"chatcmpl-scripted-{next(self._ids)}"


# -- payloads ---------------------------------------------------------------------------


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _message_text(message: Any) -> str:
    """The text of a message: plain ``content``, or the text parts of a content list."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _usage(request: RecordedRequest, reply: Reply) -> dict[str, int]:
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = sum(_words(_message_text(m)) + 1 for m in request.messages)
    completion = reply.completion_tokens
    if completion is None:
        completion = max(1, _words(reply.content) + _words(reply.reasoning))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _error_body(status: int, message: str = "") -> dict[str, Any]:
    fallback = ("invalid_request_error", None, f"Error {status} (scripted).")
    if status >= 500:
        fallback = ("server_error", None, f"The server had an error: {status} (scripted).")
    kind, code, default_message = _ERRORS.get(status, fallback)
    error = {"message": message or default_message, "type": kind, "param": None, "code": code}
    return {"error": error}


def _completion(cid: str, request: RecordedRequest, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        "usage": _usage(request, reply),
    }


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
        yield {**base, "choices": [], "usage": _usage(request, reply)}


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
            return self._send_json(404, _error_body(404))
        if not self.server.owner._authorized(self._headers()):
            return self._send_json(401, _error_body(401))
        models = self.server.owner.models()
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in models]
        return self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        body = self._read_body()
        if self._route() != "/v1/chat/completions":
            return self._send_json(404, _error_body(404))
        if not isinstance(body, dict):
            return self._send_json(400, _error_body(400, "request body is not a JSON object"))
        self._chat_completion(body)

    def _not_found(self) -> None:
        self._read_body()
        self._send_json(404, _error_body(404))

    do_PUT = do_DELETE = do_PATCH = _not_found

    # -- chat completions ------------------------------------------------------------

    def _chat_completion(self, body: dict[str, Any]) -> None:
        owner = self.server.owner
        messages = body.get("messages")
        request = RecordedRequest(
            model=str(body.get("model", "")),
            messages=messages if isinstance(messages, list) else [],
            body=body,
            headers=self._headers(),
            path=self.path,
            at=time.monotonic(),
        )
        owner._record(request)
        if not owner._authorized(request.headers):
            return self._send_json(401, _error_body(401))
        reply = owner._next_reply(request)
        if reply.delay_s > 0 and owner._stopping.wait(reply.delay_s):
            self.close_connection = True  # the server is stopping: hang up without answering
            return None
        if reply.raw_body is not None:
            kind = "text/event-stream" if body.get("stream") else "application/json"
            return self._send(reply.status, reply.raw_body.encode(), kind, reply.headers)
        if reply.status != 200:
            return self._send_json(reply.status, _error_body(reply.status, reply.content), reply)
        if body.get("stream"):
            return self._stream(request, reply)
        return self._send_json(200, _completion(owner._next_id(), request, reply), reply)

    def _stream(self, request: RecordedRequest, reply: Reply) -> None:
        """Server-sent events in HTTP/1.1 chunked transfer encoding (keeps the connection)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        events = [json.dumps(c) for c in _chunks(self.server.owner._next_id(), request, reply)]
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
