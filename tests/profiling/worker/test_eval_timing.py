"""Timing statistics and how many input/output sets the timed calls rotate through."""

from __future__ import annotations

import math

import pytest

from accelopt.profiling.stats import summarize
from accelopt.profiling.worker.rotation import COLD_SPAN_BYTES, MAX_ROTATION_SETS, rotation_sets

MIB = 1 << 20


def test_summarize_a_known_list():
    stats = summarize([5.0, 1.0, 4.0, 2.0, 3.0])
    assert stats.latency_s == 3.0  # median
    assert stats.min_s == 1.0
    assert stats.noise == pytest.approx((4.0 - 2.0) / 3.0)  # IQR / median
    assert stats.calls == 5


def test_summarize_one_sample_has_no_noise():
    stats = summarize([2e-3])
    assert (stats.latency_s, stats.min_s, stats.noise, stats.calls) == (2e-3, 2e-3, 0.0, 1)


def test_summarize_empty_raises():
    with pytest.raises(ValueError):
        summarize([])


@pytest.mark.parametrize("set_mib", [9, 20, 29, 56, 112])
def test_rotation_sets_span_the_cold_span(set_mib):
    n = rotation_sets(set_mib * MIB, 32 * MIB, 1 << 40)
    assert n * set_mib * MIB >= COLD_SPAN_BYTES
    assert (n - 1) * set_mib * MIB < COLD_SPAN_BYTES  # and no more sets than that takes


def test_a_big_llc_widens_the_span():
    assert rotation_sets(64 * MIB, 256 * MIB, 1 << 40) == 16  # 4 x 256 MiB > 512 MiB


@pytest.mark.parametrize("set_mib", [300, 600, 2000])
def test_rotation_sets_are_at_least_two(set_mib):
    assert rotation_sets(set_mib * MIB, 32 * MIB, 1 << 40) == 2


def test_rotation_sets_for_silu_on_the_test_llc():
    set_bytes = 2 * 2048 * 3584 * 4  # x and y of silu's cpu workload: 56 MiB
    assert rotation_sets(set_bytes, 32 * MIB, 1 << 30) == 10


def test_rotation_sets_unknown_llc_assumes_32_mib():
    assert rotation_sets(24 * MIB, None, 1 << 40) == rotation_sets(24 * MIB, 32 * MIB, 1 << 40)


def test_rotation_sets_capped_by_the_budget():
    assert rotation_sets(40 * MIB, 32 * MIB, 100 * MIB) == 2


def test_rotation_sets_capped_at_64():
    assert rotation_sets(1024, 32 * MIB, 1 << 40) == MAX_ROTATION_SETS == 64


@pytest.mark.parametrize(
    ("set_bytes", "budget"), [(1 << 31, 1 << 30), (64 * MIB, 1), (0, 1 << 30), (1, 0)]
)
def test_rotation_sets_at_least_one(set_bytes, budget):
    n = rotation_sets(set_bytes, 32 * MIB, budget)
    assert 1 <= n <= MAX_ROTATION_SETS
    assert isinstance(n, int)
    if set_bytes > budget:
        assert n == 1


def test_rotation_sets_grow_as_sets_shrink():
    counts = [rotation_sets(s * MIB, 32 * MIB, 1 << 40) for s in (512, 64, 16, 1)]
    assert counts == sorted(counts) and counts[0] == 2 and counts[-1] == 64
    assert counts[1] == math.ceil(512 / 64)
