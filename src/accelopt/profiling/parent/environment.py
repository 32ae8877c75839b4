"""What the parent does so that its workers never see its secrets (the API keys of its
environment): it makes itself non-dumpable (``protect_parent``) and starts each worker with an
allow-listed environment (``worker_env``). What a worker then does to itself is
``worker/sandbox.py``."""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

# What a worker inherits from the parent's environment: what Python, the compiler, OpenMP, BLAS,
# CUDA and Triton need (TRITON_INTERPRET among them), nothing else (API keys and tokens stay in the
# parent). PYTHONUNBUFFERED is left out on purpose: it would make a kernel's printf a system call
# per character.
_ENV_NAMES = {
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "TMPDIR",
    "TEMP",
    "TMP",
    "CC",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "LD_LIBRARY_PATH",
    "XDG_CACHE_HOME",
    "TZ",
    "ACCELOPT_CACHE_DIR",
    "ACCELOPT_CPU_TARGET",
    "ACCELOPT_UNSANDBOXED",
}
_ENV_PREFIXES = ("LC_", "OMP_", "GOMP_", "KMP_", "OPENBLAS_", "MKL_", "CUDA_", "NVIDIA_", "TRITON_")
PR_SET_DUMPABLE = 4


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


def protect_parent() -> None:
    """Make this process (the one holding the API keys) non-dumpable: its ``/proc`` files
    (environ, mem, maps) become unreadable to other processes of the same user, workers
    included, and no core dump of it is written."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(ctypes.c_int(PR_SET_DUMPABLE), ctypes.c_ulong(0), 0, 0, 0)
