"""Reading and writing the kernel's process's memory from the worker (``process_vm_readv`` and
``process_vm_writev``), at addresses the kernel host gave before any kernel code existed."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from functools import cache
from typing import Any

from accelopt.backends.base import KernelError
from accelopt.backends.status import Status

IOV_MAX = 1024


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


@cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    for name in ("process_vm_readv", "process_vm_writev"):
        fn = getattr(libc, name)
        fn.argtypes = [
            ctypes.c_int,
            ctypes.POINTER(_Iovec),
            ctypes.c_ulong,
            ctypes.POINTER(_Iovec),
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]
        fn.restype = ctypes.c_ssize_t
    return libc


def transfer(pid: int, pairs: Sequence[tuple[int, int, int]], write: bool) -> None:
    """Copy ``(local address, remote address, bytes)`` pairs to (write) or from the process:
    up to IOV_MAX pairs per system call, a pair at a time where a call moved less."""
    fn = _libc().process_vm_writev if write else _libc().process_vm_readv
    for first in range(0, len(pairs), IOV_MAX):
        chunk = pairs[first : first + IOV_MAX]
        local = (_Iovec * len(chunk))(*(_Iovec(a, n) for a, _, n in chunk))
        remote = (_Iovec * len(chunk))(*(_Iovec(r, n) for _, r, n in chunk))
        if fn(pid, local, len(chunk), remote, len(chunk), 0) == sum(n for _, _, n in chunk):
            continue
        for one in chunk:  # a partial transfer (a large buffer) or a fault: one by one
            _transfer_one(fn, pid, *one)


def _transfer_one(fn: Any, pid: int, local: int, remote: int, n: int) -> None:
    done = 0
    while done < n:
        liov, riov = _Iovec(local + done, n - done), _Iovec(remote + done, n - done)
        moved = fn(pid, ctypes.byref(liov), 1, ctypes.byref(riov), 1, 0)
        if moved <= 0:
            err = ctypes.get_errno()
            raise KernelError(
                f"the harness could not reach the kernel's memory ({os.strerror(err)}): "
                "the kernel unmapped or protected its own buffers",
                Status.CRASH,
            )
        done += moved
