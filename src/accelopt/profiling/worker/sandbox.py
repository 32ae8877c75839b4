"""Isolation a worker process applies to itself: no network, capped memory and files, no cores.

Called by the worker at start-up, before any thread exists (``unshare`` of a user namespace needs
a single-threaded process, and OpenBLAS starts threads when NumPy is imported).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
MAX_FILE_BYTES = 256 << 20  # no file a worker or its compiler writes may grow past this


def _unshare(flags: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.unshare(ctypes.c_int(flags)) == 0


def _map_ids(uid: int, gid: int) -> None:
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def isolate_network() -> bool:
    """Move into an empty network namespace (only a down loopback). True when it worked."""
    if _unshare(CLONE_NEWNET):
        return True
    uid, gid = os.getuid(), os.getgid()
    if not _unshare(CLONE_NEWUSER | CLONE_NEWNET):
        return False
    with suppress(OSError):
        _map_ids(uid, gid)
    return True


def watch_parent(interval_s: float = 1.0) -> None:
    """Exit when the parent (the pool) goes away, even while a kernel hangs: a daemon thread
    (ctypes releases the GIL during the kernel call) checks the parent pid. PR_SET_PDEATHSIG is
    not used: it fires when the parent *thread* that started the worker ends, and pools start
    workers from short-lived threads."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="accelopt-parent-watch", daemon=True).start()


def limit_process() -> None:
    """Limits for the worker's lifetime: no core dumps, files capped (writes fail, no signal)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    cap = MAX_FILE_BYTES if hard == resource.RLIM_INFINITY else min(hard, MAX_FILE_BYTES)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, hard))


def mapped_bytes() -> int:
    """The process's virtual memory now (what RLIMIT_AS counts)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


@contextmanager
def memory_cap(extra_bytes: int) -> Iterator[int]:
    """Cap the address space at what is mapped now plus ``extra_bytes`` while kernel code runs.

    The harness allocates its buffers before entering, so the cap bounds only what the kernel maps.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped_bytes() + extra_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield cap
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
