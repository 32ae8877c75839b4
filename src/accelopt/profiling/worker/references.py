"""Inputs and reference outputs, computed once per (problem, workload, seed, harness) and reused.

Generating a workload's inputs and its float64 reference costs far more than the kernel call it
checks (a float64 matmul, NumPy temporaries), so a worker keeps them: in memory (least recently
used first out, up to a byte budget) and on disk under ``cache_dir()/references/<harness>/`` (npz
files written atomically). The harness version (a hash of its sources, ``config.HARNESS_VERSION``)
is in the path, so a change to a problem's generator or reference never serves stale data. The
disk budget covers every harness version's folder together, least recently used evicted first, so
the files of versions no longer run go before anything in use and the cache never outgrows it.

An evaluation's default seeds come from a per-machine pool (``parent/seeds.py``): kernels are then
all checked on the same inputs on one machine, which is what makes the references reusable.
``prepared_seeds`` gives a run's seeds, computed or reused, two at a time.
"""

from __future__ import annotations

import os
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from accelopt import settings
from accelopt.problems.records import Problem
from accelopt.profiling.config import HARNESS_VERSION, EvalConfig
from accelopt.profiling.worker.steps import Report

Arrays = tuple[np.ndarray, ...]
Prepared = tuple[Arrays, Arrays]  # (inputs in float32, references in float64)


def _nbytes(prepared: Prepared) -> int:
    return sum(a.nbytes for group in prepared for a in group)


def _frozen(prepared: Prepared) -> Prepared:
    for group in prepared:
        for array in group:
            array.flags.writeable = False
    return prepared


class DiskCache:
    """npz files of prepared seeds under ``root/<harness>/``; past ``budget_bytes`` in all (every
    harness version's folder counted), the least recently used are evicted."""

    def __init__(self, root: Path, harness: str, budget_bytes: int) -> None:
        self.root = root
        self.harness = harness
        self.budget_bytes = budget_bytes

    def path(self, key: tuple[str, str, int]) -> Path:
        problem, workload, seed = key
        return self.root / self.harness / f"{problem}--{workload}" / f"{seed}.npz"

    def load(self, key: tuple[str, str, int]) -> Prepared | None:
        path = self.path(key)
        try:
            with np.load(path, allow_pickle=False) as data:
                n_in = int(data["n_inputs"])
                n_out = int(data["n_outputs"])
                inputs = tuple(data[f"in{i}"] for i in range(n_in))
                refs = tuple(data[f"ref{i}"] for i in range(n_out))
            os.utime(path)  # recently used
        except (OSError, KeyError, ValueError, zipfile.BadZipFile):
            return None
        return inputs, refs

    def save(self, key: tuple[str, str, int], prepared: Prepared) -> None:
        if _nbytes(prepared) > self.budget_bytes:
            return
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
            inputs, refs = prepared
            arrays = {f"in{i}": a for i, a in enumerate(inputs)}
            arrays |= {f"ref{i}": a for i, a in enumerate(refs)}
            np.savez(tmp, n_inputs=len(inputs), n_outputs=len(refs), **arrays)
            os.replace(tmp, path)
            self._evict()
        except OSError:  # a full disk or a capped file size: the cache is an optimisation
            return

    def _evict(self) -> None:
        files = []
        for path in self.root.glob("*/*/*.npz"):
            if path.name.startswith("."):  # being written
                continue
            try:
                stat = path.stat()
            except OSError:
                continue
            files.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.budget_bytes:
                return
            path.unlink(missing_ok=True)
            _remove_if_empty(path.parent)
            total -= size


def _remove_if_empty(folder: Path) -> None:
    """Drop a workload's folder, then its harness folder, once eviction emptied them."""
    for empty in (folder, folder.parent):
        try:
            empty.rmdir()
        except OSError:  # not empty, or another worker is writing into it
            return


class ReferenceStore:
    """Prepared seeds in memory (LRU up to ``memory_bytes``), backed by a ``DiskCache``."""

    def __init__(self, disk: DiskCache | None, memory_bytes: int) -> None:
        self.disk = disk
        self.memory_bytes = memory_bytes
        self._memory: OrderedDict[tuple[str, str, int], Prepared] = OrderedDict()
        self._lock = threading.Lock()  # seeds are prepared two at a time
        self.hits = self.misses = 0

    def get(
        self, problem: str, workload: str, seed: int, compute: Callable[[], Prepared]
    ) -> Prepared:
        key = (problem, workload, seed)
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                self.hits += 1
                return self._memory[key]
        prepared = self.disk.load(key) if self.disk is not None else None
        if prepared is None:
            self.misses += 1
            prepared = compute()
            if self.disk is not None:
                self.disk.save(key, prepared)
        else:
            self.hits += 1
        self._remember(key, _frozen(prepared))
        return prepared

    def _remember(self, key: tuple[str, str, int], prepared: Prepared) -> None:
        if _nbytes(prepared) > self.memory_bytes:
            return
        with self._lock:
            self._memory[key] = prepared
            while sum(_nbytes(p) for p in self._memory.values()) > self.memory_bytes:
                self._memory.popitem(last=False)


_STORES: dict[tuple[Path, int, int], ReferenceStore] = {}


def worker_store(
    cache_dir: Path, harness: str, memory_bytes: int, disk_bytes: int
) -> ReferenceStore:
    """The reference store of this (worker) process: one per cache location and budgets."""
    key = (cache_dir, memory_bytes, disk_bytes)
    if key not in _STORES:
        disk = DiskCache(cache_dir / "references", harness, disk_bytes) if disk_bytes else None
        _STORES[key] = ReferenceStore(disk, memory_bytes)
    return _STORES[key]


def prepared_seeds(
    problem: Problem, workload: str, seeds: Sequence[int], config: EvalConfig, report: Report
) -> Iterator[tuple[str, Arrays, Arrays]]:
    """Each seed's name in errors (``seed 2 of 5``), inputs and float64 references, computed once
    then reused (this process's store), two seeds at a time on two threads (NumPy releases the
    GIL), never while kernel code runs: the memory cap stays the kernel's."""
    store = worker_store(
        settings.cache_dir(),
        HARNESS_VERSION,
        config.reference_memory_bytes,
        config.reference_disk_bytes,
    )
    sizes = problem.workload(workload).sizes

    def prepare(seed: int) -> Prepared:
        def compute() -> Prepared:
            fresh = problem.generate(sizes, seed)
            return fresh, problem.reference(*(x.astype(np.float64) for x in fresh))

        return store.get(problem.versioned_name, workload, seed, compute)

    n = len(seeds)
    with ThreadPoolExecutor(max_workers=2) as pool:
        for first in range(0, n, 2):
            batch = seeds[first : first + 2]
            report("reference", f"seeds {first + 1}-{first + len(batch)} of {n}")
            prepared = list(pool.map(prepare, batch))  # all done before any call
            for j, (fresh, refs) in enumerate(prepared):
                yield f"seed {first + j + 1} of {n}", fresh, refs
