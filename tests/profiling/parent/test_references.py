"""Inputs and references are computed once per (problem, workload, seed, harness) and reused:
in a worker's memory, then from disk."""

from __future__ import annotations

import os

import numpy as np
import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.problems import load_problem
from accelopt.profiling.config import HARNESS_VERSION, EvalConfig
from accelopt.profiling.parent.evaluator import Evaluator
from accelopt.profiling.worker.references import DiskCache, ReferenceStore


def _prepared(value: float, n: int = 1000):
    return (np.full(n, value, np.float32),), (np.full(n, 2 * value, np.float64),)


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, value: float = 1.0, n: int = 1000):
        def compute():
            self.calls += 1
            return _prepared(value, n)

        return compute


def test_a_seed_is_computed_once_then_served_from_memory_read_only():
    store, count = ReferenceStore(None, 1 << 20), Counting()
    inputs, _ = store.get("silu", "cpu", 7, count())
    again = store.get("silu", "cpu", 7, count())
    assert count.calls == 1 and again[0] is inputs and (store.hits, store.misses) == (1, 1)
    with pytest.raises(ValueError):
        inputs[0][0] = 5.0  # nobody may change what later evaluations are checked against
    store.get("silu", "cpu", 8, count())
    assert count.calls == 2


def test_a_new_worker_reads_what_another_wrote_to_disk(tmp_path):
    count = Counting()
    ReferenceStore(DiskCache(tmp_path, "h1", 1 << 30), 1 << 20).get("silu", "cpu", 7, count(3.0))
    fresh_worker = ReferenceStore(DiskCache(tmp_path, "h1", 1 << 30), 1 << 20)
    inputs, refs = fresh_worker.get("silu", "cpu", 7, count(99.0))
    assert count.calls == 1
    assert inputs[0][0] == 3.0 and refs[0].dtype == np.float64 and refs[0][0] == 6.0


def test_a_corrupt_file_is_computed_again(tmp_path):
    disk, count = DiskCache(tmp_path, "h1", 1 << 30), Counting()
    ReferenceStore(disk, 0).get("silu", "cpu", 7, count())
    disk.path(("silu", "cpu", 7)).write_bytes(b"not an npz")
    ReferenceStore(disk, 0).get("silu", "cpu", 7, count())
    assert count.calls == 2


def test_memory_and_disk_stay_within_their_budgets(tmp_path):
    size = 1000 * (4 + 8)  # one prepared seed
    disk, count = DiskCache(tmp_path, "h1", int(2.5 * size) + 2000), Counting()
    store = ReferenceStore(disk, int(1.5 * size))
    for seed in range(4):
        store.get("silu", "cpu", seed, count())
    assert len(store._memory) == 1 and ("silu", "cpu", 3) in store._memory
    kept = sorted(p.stem for p in tmp_path.glob("*/*/*.npz"))
    assert kept == ["2", "3"]  # the least recently used went first


def test_one_budget_covers_every_harness_version_and_old_versions_go_first(tmp_path):
    size = 1000 * (4 + 8)
    old = ReferenceStore(DiskCache(tmp_path, "old", int(2.5 * size) + 2000), 0)
    for seed in range(2):
        old.get("silu", "cpu", seed, Counting()())
        os.utime(old.disk.path(("silu", "cpu", seed)), (1e9 + seed, 1e9 + seed))  # used long ago
    new = ReferenceStore(DiskCache(tmp_path, "new", int(2.5 * size) + 2000), 0)
    for seed in range(2):
        new.get("silu", "cpu", seed, Counting()())
    kept = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("*/*/*.npz"))
    assert kept == ["new/silu--cpu/0.npz", "new/silu--cpu/1.npz"]
    assert not (tmp_path / "old").exists()  # an emptied version's folder goes too


def test_too_big_to_keep_is_computed_each_time(tmp_path):
    store, count = ReferenceStore(DiskCache(tmp_path, "h1", 100), 100), Counting()
    store.get("silu", "cpu", 1, count())
    store.get("silu", "cpu", 1, count())
    assert count.calls == 2 and not list(tmp_path.glob("*/*/*.npz"))


@pytest.mark.timeout(120)
def test_evaluations_share_seeds_and_their_references(accelopt_cache, hw):
    problem = load_problem("silu")
    kernel = Kernel(shipped_kernel(problem, "baseline").read_text())
    config = EvalConfig(workers=1, seeds=2, check_only=True)
    with Evaluator(hw, config) as evaluator:
        first = evaluator.evaluate(kernel, problem, "small")
        second = evaluator.evaluate(kernel, problem, "small")
    assert first.status is Status.PASSED and second.status is Status.PASSED
    assert first.seeds == second.seeds
    stored = accelopt_cache / "references" / HARNESS_VERSION / "silu--small"
    assert set(first.seeds) <= {int(p.stem) for p in stored.glob("*.npz")}
