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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
MAX_FILE_BYTES = 256 << 20  # no file a worker or its compiler writes may grow past this

# What a worker inherits from the parent's environment: what Python, the compiler, OpenMP, BLAS,
# CUDA and Triton need (TRITON_INTERPRET among them), nothing else (API keys and tokens stay in the
# parent). PYTHONUNBUFFERED is left out on purpose: it would make a kernel's printf a system call
# per character.
_ENV_NAMES = {
    "PATH", "HOME", "USER", "LANG", "TMPDIR", "TEMP", "TMP", "CC", "PYTHONPATH", "PYTHONHOME",
    "VIRTUAL_ENV", "LD_LIBRARY_PATH", "XDG_CACHE_HOME", "TZ", "ACCELOPT_CACHE_DIR",
    "ACCELOPT_CPU_TARGET", "ACCELOPT_UNSANDBOXED",
}  # fmt: skip
_ENV_PREFIXES = ("LC_", "OMP_", "GOMP_", "KMP_", "OPENBLAS_", "MKL_", "CUDA_", "NVIDIA_", "TRITON_")


def worker_env(parent: Mapping[str, str], threads: int) -> dict[str, str]:
    """The environment of a worker process: an allow-list of the parent's, and the thread count."""
    env = {k: v for k, v in parent.items() if k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)}
    env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("OPENBLAS_NUM_THREADS", str(threads))  # the numpy kind and the references
    # OpenBLAS threads busy-wait ~2^28 cycles after each call: right after a correctness check
    # they would spin beside the timed kernel's threads. 2^4 cycles: they sleep at once.
    env.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    # GPUs numbered as nvidia-smi numbers them (hardware/gpu.py), not fastest first.
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    return env


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


PR_SET_DUMPABLE = 4


def protect_parent() -> None:
    """Make this process (the one holding the API keys) non-dumpable: its ``/proc`` files
    (environ, mem, maps) become unreadable to other processes of the same user, workers
    included, and no core dump of it is written."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(ctypes.c_int(PR_SET_DUMPABLE), ctypes.c_ulong(0), 0, 0, 0)


_UNSHARE_PROBE = (
    "import sys; from accelopt.profiling.worker.sandbox import isolate_network; "
    "sys.exit(0 if isolate_network() else 1)"
)


def network_isolation_possible() -> bool:
    """Whether a new process here can enter an empty network namespace, as workers do."""
    import subprocess
    import sys

    probe = subprocess.run([sys.executable, "-c", _UNSHARE_PROBE], timeout=60, check=False)
    return probe.returncode == 0


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
