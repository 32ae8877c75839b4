"""The arrays a worker keeps for reading kernels' buffers back (profiling/worker/hostmemory.py)."""

from __future__ import annotations

import numpy as np

from accelopt.profiling.worker.hostmemory import HostMemory, Lease, worker_memory


def test_an_array_given_back_is_lent_again_for_the_same_shape():
    memory = HostMemory(1 << 20)
    first = memory.take((4, 8))
    memory.give_back(first)
    assert memory.kept_bytes == first.nbytes
    assert memory.take((8, 4)) is not first  # another shape: a new array
    assert memory.take((4, 8)) is first
    assert memory.kept_bytes == 0


def test_the_budget_drops_the_least_recently_given_back():
    memory = HostMemory(3 * 4096)
    old, new = (memory.take((1024,)) for _ in range(2))
    memory.give_back(old)
    memory.give_back(new)
    memory.give_back(memory.take((2048,)))  # 8 KiB more: over the 12 KiB budget
    assert memory.kept_bytes <= 3 * 4096
    assert memory.take((1024,)) is new  # the older one went first
    memory.give_back(np.empty(1 << 20, dtype=np.float32))  # larger than the budget: not kept
    assert memory.kept_bytes <= 3 * 4096


def test_a_lease_keeps_one_array_per_name_and_gives_all_back():
    memory = HostMemory(1 << 20)
    lease = Lease(memory)
    a = lease.array(("input", 0), (16,))
    assert lease.array(("input", 0), (16,)) is a  # the next seed reads into the same array
    b = lease.array(("input", 1), (16,))
    assert b is not a
    lease.close()
    again = Lease(memory)  # the next evaluation borrows what this one used
    assert {id(again.array("x", (16,))), id(again.array("y", (16,)))} == {id(a), id(b)}


def test_no_budget_means_new_arrays_every_time():
    assert worker_memory(0) is None
    lease = Lease(None)
    a = lease.array("x", (4,))
    lease.close()
    assert Lease(None).array("x", (4,)) is not a
