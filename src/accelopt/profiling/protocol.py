"""Messages between the parent and a worker: one JSON object per line over a socket.

JSON, not pickle: once a kernel is loaded the worker is untrusted, and the parent must not run
anything a worker sends. A line over MAX_MESSAGE_BYTES or one that does not parse is a protocol
error, which the parent treats like a crash.
"""

from __future__ import annotations

import json
import select
import socket
import time
from typing import Any

MAX_MESSAGE_BYTES = 32 << 20


class ProtocolError(Exception):
    pass


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def recv(self, timeout_s: float | None) -> dict[str, Any] | None:
        """The next message, or None when ``timeout_s`` passes first; EOFError when closed."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_MESSAGE_BYTES:
                raise ProtocolError("a worker message exceeded the size limit")
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.sock], [], [], remaining)
            if not ready:
                return None
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("worker closed the channel")
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise ProtocolError(f"unreadable worker message: {exc}") from None
        if not isinstance(message, dict):
            raise ProtocolError("worker message is not an object")
        return message

    def close(self) -> None:
        self.sock.close()
