"""Host buffers: alignment, guard regions each side, fences that fault, HostDevice's records."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys

import numpy as np
import pytest

from accelopt.backends.buffers import (
    ALIGNMENT,
    FENCE_BYTES,
    GUARD_BYTES,
    PAGE_BYTES,
    allocate,
)
from accelopt.backends.device import HostDevice
from accelopt.backends.guards import find_overruns

SHAPES = [(1,), (3, 5), (64, 112), (7, 13, 3)]
GUARD_FLOATS = GUARD_BYTES // 4


@pytest.mark.parametrize("fence_bytes", [0, FENCE_BYTES])
@pytest.mark.parametrize("shape", SHAPES)
def test_a_buffer_is_aligned_with_a_guard_each_side(shape, fence_bytes):
    block = allocate(shape, fence_bytes=fence_bytes)
    array = block.array
    assert array.shape == shape and array.dtype == np.float32 and array.flags.c_contiguous
    assert array.ctypes.data % ALIGNMENT == 0
    assert block.before.size >= GUARD_FLOATS and block.after.size >= GUARD_FLOATS
    # The regions touch the buffer on both sides.
    assert block.before.ctypes.data + 4 * block.before.size == array.ctypes.data
    assert array.ctypes.data + array.nbytes == block.after.ctypes.data


@pytest.mark.parametrize("shape", SHAPES)
def test_a_fenced_block_ends_on_pages(shape):
    block = allocate(shape, fence_bytes=FENCE_BYTES)
    assert block.before.ctypes.data % PAGE_BYTES == 0
    assert (block.after.ctypes.data + block.after.nbytes) % PAGE_BYTES == 0
    assert block.before.size == GUARD_FLOATS  # the buffer starts on a page


_TOUCH = """
import ctypes, sys
from accelopt.backends.buffers import allocate, FENCE_BYTES
block = allocate((64, 112), fence_bytes=FENCE_BYTES)
end = block.after.ctypes.data + block.after.nbytes
where = {{"before": block.before.ctypes.data - 4, "after": end, "far": end + (1 << 20)}}
print("touching", flush=True)
ctypes.c_float.from_address(where[sys.argv[1]]).value {op}
print("survived", flush=True)
"""


@pytest.mark.parametrize("where", ["before", "after", "far"])
@pytest.mark.parametrize("op", ["+ 0", "= 1.0"])
def test_a_read_or_write_beyond_the_guard_faults(where, op):
    touch = subprocess.run(
        [sys.executable, "-c", _TOUCH.format(op=op), where],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "touching" in touch.stdout, touch.stderr
    assert touch.returncode == -signal.SIGSEGV, touch.stdout + touch.stderr


def test_the_guard_itself_is_ordinary_memory():
    block = allocate((4,), fence_bytes=FENCE_BYTES)
    block.after[-1] = block.before[0] = 1.0  # the floats next to the fences


# -- HostDevice --------------------------------------------------------------------------------


@pytest.mark.parametrize("fenced", [False, True])
def test_every_host_buffer_is_guarded(fenced):
    device = HostDevice(seed=0)
    buffer = device.empty((8, 8), np.nan, fenced=fenced)
    assert np.isnan(buffer).all()  # quiet NaN, the harness's poison
    guards = device.guards(buffer)
    assert guards is not None and find_overruns(guards) == []
    assert np.isnan(guards.before).all() and np.isnan(guards.after).all()
    buffer[:] = 1.0  # writing the whole buffer touches no guard
    assert find_overruns(guards) == []
    flat = guards.after  # the float just past the buffer, as a kernel would reach it
    flat[0] = 0.0
    assert [(o.side, o.floats) for o in find_overruns(guards)] == [("after", 1)]


def test_uploads_are_guarded_copies():
    device = HostDevice(seed=0)
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    copy = device.upload(host)
    assert copy is not host and np.array_equal(copy, host)
    assert copy.ctypes.data % ALIGNMENT == 0
    guards = device.guards(copy)
    assert guards is not None and find_overruns(guards) == []
    assert device.upload(host * 2, into=copy) is copy and find_overruns(guards) == []


def test_each_buffer_has_its_own_pattern():
    device = HostDevice(seed=0)
    one, two = device.empty((16,)), device.empty((16,))
    first, second = device.guards(one), device.guards(two)
    assert first is not None and second is not None
    assert not np.array_equal(first.after_bits[:100], second.after_bits[:100])


def test_unknown_buffers_have_no_guards_and_records_go_with_their_buffer():
    device = HostDevice(seed=0)
    assert device.guards(np.zeros(4, dtype=np.float32)) is None
    buffer = device.empty((4,))
    assert device.guards(buffer) is not None
    del buffer
    gc.collect()
    assert device._guards == {}
