"""Guard bookkeeping on plain NumPy arrays: patterns, what counts as an overrun, and the words."""

from __future__ import annotations

import numpy as np
import pytest

from accelopt.backends.guards import (
    Guards,
    Overrun,
    arm,
    describe,
    find_overruns,
    signalling_nans,
)


def _is_signalling_nan(bits: np.ndarray) -> np.ndarray:
    exponent = (bits >> 23) & 0xFF
    quiet = (bits >> 22) & 1
    payload = bits & ((1 << 22) - 1)
    return (exponent == 0xFF) & (quiet == 0) & (payload != 0)


@pytest.fixture
def guards() -> Guards:
    return arm(
        np.zeros(16, dtype=np.float32), np.zeros(20, dtype=np.float32), np.random.default_rng(7)
    )


def test_patterns_are_signalling_nans_no_harness_write_can_match():
    bits = signalling_nans(10_000, np.random.default_rng(0))
    assert bits.dtype == np.uint32 and _is_signalling_nan(bits).all()
    assert np.isnan(bits.view(np.float32)).all()
    assert np.float32(np.nan).view(np.uint32) not in bits  # the harness's poison is quiet
    assert len(np.unique(bits)) > 9_000  # random, not one repeated value


def test_patterns_follow_the_seed():
    one = signalling_nans(64, np.random.default_rng(3))
    assert np.array_equal(one, signalling_nans(64, np.random.default_rng(3)))
    assert not np.array_equal(one, signalling_nans(64, np.random.default_rng(4)))


def test_arm_fills_both_regions_with_different_patterns(guards):
    assert np.array_equal(guards.before.view(np.uint32), guards.before_bits)
    assert np.array_equal(guards.after.view(np.uint32), guards.after_bits)
    assert not np.array_equal(guards.before_bits, guards.after_bits[:16])


def test_untouched_guards_have_no_overrun(guards):
    assert find_overruns(guards) == []


def test_one_float_past_the_end(guards):
    guards.after[0] = 0.0
    assert find_overruns(guards) == [Overrun("after", floats=1, furthest=1)]


def test_floats_before_the_start_count_from_the_buffer_edge(guards):
    guards.before[-3:] = 1.0  # the three floats just before the buffer
    assert find_overruns(guards) == [Overrun("before", floats=3, furthest=3)]
    guards.before[0] = 1.0  # the first float of a 16-float region: 16 before the start
    assert find_overruns(guards) == [Overrun("before", floats=4, furthest=16)]


def test_a_scattered_write_reports_its_furthest_offset(guards):
    guards.after[[2, 9]] = 5.0
    assert find_overruns(guards) == [Overrun("after", floats=2, furthest=10)]


def test_writing_a_quiet_nan_is_seen(guards):
    guards.after[4] = np.nan
    assert find_overruns(guards) == [Overrun("after", floats=1, furthest=5)]


def test_a_copy_of_another_buffers_guard_is_seen():
    rng = np.random.default_rng(1)
    first = arm(np.empty(8, np.float32), np.empty(8, np.float32), rng)
    second = arm(np.empty(8, np.float32), np.empty(8, np.float32), rng)
    second.after[:] = first.after  # bits a kernel could read next to another buffer
    assert find_overruns(second)[0].floats == 8


def test_both_sides(guards):
    guards.before[-1] = 0.0
    guards.after[0] = 0.0
    assert [o.side for o in find_overruns(guards)] == ["before", "after"]


@pytest.mark.parametrize(
    ("overrun", "words"),
    [
        (Overrun("after", 1, 1), "wrote 1 float past the end of output 'y'"),
        (Overrun("before", 3, 3), "wrote 3 floats before the start of input 'x'"),
        (
            Overrun("after", 1, 8),
            "wrote 1 float past the end of input 'x' (the furthest 8 floats past it)",
        ),
        (
            Overrun("before", 2, 1024),
            "wrote 2 floats before the start of output 'y' (the furthest 1024 floats before it)",
        ),
    ],
)
def test_describe(overrun, words):
    label = "output 'y'" if "'y'" in words else "input 'x'"
    assert describe(label, [overrun]) == words


def test_describe_both_sides():
    words = describe("output 'y'", [Overrun("before", 1, 1), Overrun("after", 2, 2)])
    assert words == (
        "wrote 1 float before the start of output 'y' and wrote 2 floats past the end of output 'y'"
    )
