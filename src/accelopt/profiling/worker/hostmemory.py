"""Host arrays a worker keeps between evaluations, for what it reads back from a kernel's buffers.

An evaluation reads a kernel's inputs and outputs back after every correctness call, and copies
the timed calls its audit keeps: on a memory-bound problem hundreds of megabytes per evaluation.
Read into new arrays, every one of those bytes is memory the process has not touched, and on a
VM a page touched for the first time is found by the hypervisor first: 64 MiB read into a new
array took 175-195 ms on this project's Intel VM, into an array already touched 9-10 ms (the copy
itself). A search evaluates the same shapes again and again, so the worker keeps those arrays
(``HostMemory``, up to a byte budget, least recently used out) and lends them to each evaluation
(``Lease``): the first evaluation of a shape touches them, the next ones only copy.

Nothing here is the kernel's: these arrays live in the worker, and the kernel's process (another
process, under its sandbox) never sees them. An evaluation overwrites what it borrows before it
reads it, so what an earlier evaluation left there decides nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

Shape = tuple[int, ...]


class HostMemory:
    """Float32 arrays kept for reuse, by shape, at most ``budget_bytes`` of them."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._free: OrderedDict[int, tuple[Shape, np.ndarray]] = OrderedDict()  # by id, LRU
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    def take(self, shape: Shape) -> np.ndarray:
        """A float32 array of ``shape``: one kept (most recently given back first), else new."""
        shape = tuple(int(d) for d in shape)
        with self._lock:
            for key in reversed(self._free):
                kept_shape, array = self._free[key]
                if kept_shape == shape:
                    del self._free[key]
                    self._bytes -= array.nbytes
                    return array
        return np.empty(shape, dtype=np.float32)

    def give_back(self, array: np.ndarray) -> None:
        """Keep ``array`` for a later ``take``, dropping the least recently given back beyond the
        budget (an array larger than the whole budget is not kept)."""
        if array.nbytes > self.budget_bytes:
            return
        with self._lock:
            self._free[id(array)] = (array.shape, array)
            self._bytes += array.nbytes
            while self._bytes > self.budget_bytes:
                _, (_, dropped) = self._free.popitem(last=False)
                self._bytes -= dropped.nbytes


class Lease:
    """What one evaluation borrows: the same array for the same name all through it (a seed's
    inputs read back into the arrays the last seed used), all given back by ``close``."""

    def __init__(self, memory: HostMemory | None) -> None:
        self._memory = memory
        self._held: dict[object, np.ndarray] = {}

    def array(self, name: object, shape: Shape) -> np.ndarray:
        held = self._held.get(name)
        if held is None or held.shape != tuple(shape):
            if held is not None and self._memory is not None:
                self._memory.give_back(held)
            held = (
                self._memory.take(shape)
                if self._memory is not None
                else np.empty(shape, dtype=np.float32)
            )
            self._held[name] = held
        return held

    def close(self) -> None:
        held, self._held = self._held, {}
        if self._memory is not None:
            for array in held.values():
                self._memory.give_back(array)


_WORKER: HostMemory | None = None
_WORKER_LOCK = threading.Lock()


def worker_memory(budget_bytes: int) -> HostMemory | None:
    """The worker process's kept arrays (one per process, under the latest caller's budget), or
    None where the budget is 0 (every evaluation reads into new arrays)."""
    global _WORKER
    if budget_bytes <= 0:
        return None
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = HostMemory(budget_bytes)
        _WORKER.budget_bytes = budget_bytes
        return _WORKER
