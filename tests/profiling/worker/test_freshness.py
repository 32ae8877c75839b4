"""The fresh inputs of timed calls, on host buffers: rolls that keep the base's values, the
inputs an audited call got, which batches are full, the comparison of sparse and full calls, and
the element-by-element check (pure functions and ``HostDevice``)."""

from __future__ import annotations

import numpy as np

from accelopt.backends.device import HostDevice
from accelopt.profiling.worker.correctness import ELEMENT_FACTOR, check_outputs
from accelopt.profiling.worker.freshness import (
    FULL_SHARE,
    MIN_FULL,
    SPARSE_FASTER,
    Freshness,
    Refreshes,
    all_full,
    batch_kind,
    confirms,
    sparse_faster,
)


def fresh(sets: int = 3) -> tuple[Freshness, list[tuple[np.ndarray, ...]], list[np.ndarray]]:
    device = HostDevice(seed=1)
    base = [np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(100, 105, dtype=np.float32)]
    buffers = [tuple(device.empty(x.shape) for x in base) for _ in range(sets)]
    return Freshness(device, buffers, base, np.random.default_rng(2)), buffers, base


def test_a_refresh_rolls_each_input_independently_and_keeps_its_values():
    freshness, buffers, base = fresh(sets=8)
    for i in range(8):
        freshness.refresh(i)
    offsets = set()
    for ins in buffers:
        for got, x in zip(ins, base, strict=True):
            assert sorted(got.ravel()) == sorted(x.ravel())  # a permutation of the base's values
        pairs = zip(ins, base, strict=True)
        offsets.add(tuple(int(np.flatnonzero(got.ravel() == x.ravel()[0])[0]) for got, x in pairs))
    assert len(offsets) > 1  # not one shift for every set or input


def test_expected_is_what_the_set_holds_after_refreshes_and_perturbations():
    freshness, buffers, _ = fresh()
    for i in range(3):
        freshness.refresh(i)
    for _ in range(5):
        freshness.perturb(1)
    freshness.refresh(2)
    for i, ins in enumerate(buffers):
        for got, want in zip(ins, freshness.expected(i), strict=True):
            np.testing.assert_array_equal(got, want)


def test_every_batch_is_full_only_where_a_refresh_is_cheap():
    assert all_full(refresh_s=0.5e-3, call_s=10e-3)
    assert not all_full(refresh_s=5e-3, call_s=10e-3)
    assert all(Refreshes(True, np.random.default_rng(0)).next_is_full() for _ in range(50))
    some = Refreshes(False, np.random.default_rng(0))
    share = np.mean([some.next_is_full() for _ in range(4000)])
    assert abs(share - 1 / FULL_SHARE) < 0.03


def test_sparse_calls_clearly_faster_than_full_ones_are_suspicious():
    rng = np.random.default_rng(3)
    full = list(1e-3 * (1 + 0.05 * rng.random(3 * MIN_FULL)))
    assert "recomputes only what changed" in sparse_faster([0.3 * t for t in full] * 3, full)
    assert "30%" in sparse_faster([0.3 * t for t in full] * 3, full)


def test_noise_or_faster_full_calls_are_not_suspicious():
    rng = np.random.default_rng(4)
    full = list(1e-3 * (1 + 0.05 * rng.random(3 * MIN_FULL)))
    assert sparse_faster([1.2 * t for t in full], full) == ""  # full calls faster: honest
    assert sparse_faster([0.9 * t for t in full], full) == ""  # within the margin
    # Two full samples on a busy machine: the interval spans them, and the slow one is noise.
    assert sparse_faster([0.8e-3] * 20, [1e-3, 3e-3]) == ""
    assert sparse_faster([1e-3] * 20, []) == ""
    assert SPARSE_FASTER < 0.9


def test_a_few_stale_elements_fail_though_the_l2_error_is_within_tolerance():
    rng = np.random.default_rng(5)
    ref = rng.standard_normal(1 << 20)
    out = ref.copy()
    out[[7, 70_000]] += 4 * ELEMENT_FACTOR * 2e-5 * (np.abs(ref[[7, 70_000]]) + 1)
    verdict = check_outputs(["y"], [out.astype(np.float32)], [ref], 2e-5)
    assert verdict.max_rel_err <= 2e-5  # the L2 norm hides them ...
    assert "2 of 1048576 elements wrong" in verdict.error  # ... the element check does not
    assert f"more than {ELEMENT_FACTOR} times the tolerance" in verdict.error


def test_rounding_errors_spread_over_every_element_pass():
    rng = np.random.default_rng(6)
    ref = rng.standard_normal(1 << 16)
    out = ref * (1 + 1e-6 * rng.standard_normal(ref.size))
    assert check_outputs(["y"], [out.astype(np.float32)], [ref], 2e-5).error == ""


def test_first_visits_and_batches_right_after_a_rewrite_count_as_neither_kind():
    assert batch_kind(rewritten=True, after_rewrite=False, first_visit=True) == "full"
    assert batch_kind(rewritten=True, after_rewrite=True, first_visit=False) == "full"
    assert batch_kind(rewritten=False, after_rewrite=False, first_visit=False) == "sparse"
    assert batch_kind(rewritten=False, after_rewrite=True, first_visit=False) == "settling"
    assert batch_kind(rewritten=False, after_rewrite=False, first_visit=True) == "settling"


def test_a_confirmation_needs_its_own_rounds_to_agree():
    assert confirms([1.0] * 8, [3.0] * 8)  # a cheat: a third of its full time
    assert not confirms([1.0] * 8, [1.1] * 8)  # an honest kernel's two kinds agree
    assert not confirms([1.0] * 3, [3.0] * 3)  # too few rounds of each kind: no accusation
    assert not confirms([1.0, 1.0, 1.0, 9.0, 9.0, 9.0, 9.0, 9.0], [3.0] * 8)  # median not below
