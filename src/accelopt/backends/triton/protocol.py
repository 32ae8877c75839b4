"""What the worker and a Triton kernel's process say to each other (``host.py``,
``kernel_host.py``): set-up messages, then commands and answers.

Set-up (before any kernel code): length-prefixed JSON on a UNIX socket, a memory file passed with
an ``alloc``. Afterwards, binary on two pipes: a command is ``<4I`` (op, sequence, calls, arguments
per call) then the calls' buffer ids (``<I`` each); an answer is ``<BBH`` (the sequence's low byte,
a status, the length of a text) then the text (an error message, at most ``ERROR_CHARS`` and a
little). The worker trusts none of an answer but the sequence and the status it reads; a short,
late or second answer is a broken protocol.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from dataclasses import dataclass
from typing import Any

OP_LOAD, OP_CALL, OP_EXIT = 1, 2, 3
OK, FAILED, REFUSED, FAULTED, LOAD_FAILED = 0, 1, 2, 3, 4
EXIT_SETUP = 96
ERROR_CHARS = 2000
MAX_TEXT = 4096
MAX_CALLS, MAX_ARGS = 256, 32
_COMMAND, _ANSWER = struct.Struct("<4I"), struct.Struct("<BBH")
_LENGTH = struct.Struct("<I")
MAX_MESSAGE = 1 << 24  # a set-up message: the kernel's source is the longest


@dataclass(frozen=True)
class Command:
    op: int
    sequence: int
    calls: list[tuple[int, ...]]


def command(op: int, sequence: int, calls: list[tuple[int, ...]]) -> bytes:
    nargs = len(calls[0]) if calls else 0
    if len(calls) > MAX_CALLS or nargs > MAX_ARGS:
        raise ValueError(f"a batch holds at most {MAX_CALLS} calls of {MAX_ARGS} arguments")
    ids = [i for call in calls for i in call]
    return _COMMAND.pack(op, sequence, len(calls), nargs) + struct.pack(f"<{len(ids)}I", *ids)


def _read_exact(fd: int, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def read_command(fd: int) -> Command | None:
    header = _read_exact(fd, _COMMAND.size)
    if header is None:
        return None
    op, sequence, ncalls, nargs = _COMMAND.unpack(header)
    body = _read_exact(fd, 4 * ncalls * nargs) if ncalls * nargs else b""
    if body is None:
        return None
    ids = struct.unpack(f"<{ncalls * nargs}I", body)
    return Command(op, sequence, [tuple(ids[i * nargs : (i + 1) * nargs]) for i in range(ncalls)])


def answer(sequence: int, status: int, text: str) -> bytes:
    data = text.encode(errors="replace")[:MAX_TEXT]
    return _ANSWER.pack(sequence & 0xFF, status, len(data)) + data


def parse_answer(data: bytes) -> tuple[int, int, str] | None:
    """(sequence byte, status, text) of one whole answer; None for anything else."""
    if len(data) < _ANSWER.size:
        return None
    sequence, status, length = _ANSWER.unpack_from(data)
    if len(data) != _ANSWER.size + length or status > LOAD_FAILED:
        return None
    return sequence, status, data[_ANSWER.size :].decode(errors="replace")


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    payload = _LENGTH.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [payload], fds)
    else:
        sock.sendall(payload)


def receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the descriptors that came with it; (None, []) at the end of the stream."""
    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 4)
    while 0 < len(data) < _LENGTH.size:
        data += sock.recv(_LENGTH.size - len(data))
    if not data:
        return None, fds
    (length,) = _LENGTH.unpack_from(data)
    if length > MAX_MESSAGE:
        return None, fds
    while len(data) < _LENGTH.size + length:
        chunk = sock.recv(min(1 << 20, _LENGTH.size + length - len(data)))
        if not chunk:
            return None, fds
        data += chunk
    return json.loads(data[_LENGTH.size : _LENGTH.size + length]), fds
