"""Judging outputs: relative L2 error in float64, NaN/Inf, shapes, and inputs that changed."""

from __future__ import annotations

import numpy as np
import pytest

from accelopt.profiling.worker.correctness import check_outputs, modified_input, rel_l2_error

TOL = 2e-5


@pytest.fixture
def ref() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)


def test_rel_l2_error_of_a_known_scaling(ref):
    assert rel_l2_error(ref * np.float32(1.001), ref) == pytest.approx(1e-3, rel=1e-3)
    assert rel_l2_error(ref, ref) == 0.0


def test_rel_l2_error_is_the_absolute_norm_for_a_zero_reference():
    out = np.array([3.0, 4.0], dtype=np.float32)
    assert rel_l2_error(out, np.zeros(2, dtype=np.float32)) == pytest.approx(5.0)


def test_rel_l2_error_is_computed_in_float64():
    # Squares of 1e30 overflow float32 (max ~3.4e38) but not float64.
    ref = np.full(8, 1e30, dtype=np.float32)
    out = ref * np.float32(1 + 2**-10)
    assert rel_l2_error(out, ref) == pytest.approx(2**-10, rel=1e-3)


def test_rel_l2_error_over_several_chunks():
    # More elements than one chunk of the float64 accumulation, with the error in the last one.
    rng = np.random.default_rng(1)
    ref = rng.standard_normal(300_001).astype(np.float32)
    out = ref.copy()
    out[-1] += 1.0
    expected = 1.0 / np.linalg.norm(ref.astype(np.float64))
    assert rel_l2_error(out, ref) == pytest.approx(expected, rel=1e-6)


def test_check_outputs_within_tolerance(ref):
    result = check_outputs(["y"], [ref * np.float32(1 + 1e-6)], [ref.astype(np.float64)], TOL)
    assert result.error == ""
    assert 0 < result.max_rel_err <= TOL


def test_check_outputs_all_nan_is_not_written(ref):
    result = check_outputs(["y"], [np.full_like(ref, np.nan)], [ref], TOL)
    assert "'y' was not written" in result.error
    assert result.max_rel_err == float("inf")


def test_check_outputs_partial_nan(ref):
    out = ref.copy()
    out[:2, :3] = np.nan
    result = check_outputs(["y"], [out], [ref], TOL)
    assert f"6 of {ref.size} values NaN" in result.error
    assert result.max_rel_err == float("inf")


def test_check_outputs_inf(ref):
    out = ref.copy()
    out[5, 5] = np.inf
    out[6, 6] = -np.inf
    result = check_outputs(["y"], [out], [ref], TOL)
    assert "2 infinite values" in result.error
    assert result.max_rel_err == float("inf")


def test_check_outputs_over_tolerance(ref):
    result = check_outputs(["y"], [ref * np.float32(1.01)], [ref], TOL)
    assert "relative L2 error" in result.error and "'y'" in result.error
    assert result.max_rel_err == pytest.approx(0.01, rel=1e-3)


def test_check_outputs_shape_mismatch(ref):
    result = check_outputs(["y"], [ref.reshape(48, 64)], [ref], TOL)
    assert "shape" in result.error and "'y'" in result.error
    assert result.max_rel_err == float("inf")


def test_check_outputs_names_the_failing_output_and_keeps_the_worst(ref):
    good, bad = ref * np.float32(1 + 1e-6), ref * np.float32(1.5)
    result = check_outputs(["a", "b"], [good, bad], [ref, ref], TOL)
    assert "'b'" in result.error and "'a'" not in result.error
    passing = check_outputs(["a", "b"], [ref, good], [ref, ref], TOL)
    assert passing.error == "" and passing.max_rel_err == pytest.approx(1e-6, rel=0.1)


def test_modified_input_unchanged_is_empty(ref):
    assert modified_input(["x"], [ref.copy()], [ref]) == ""


def test_modified_input_is_nan_aware():
    # NaN != NaN, but the same bits are the same input.
    before = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    assert modified_input(["x"], [before.copy()], [before]) == ""


def test_modified_input_is_bitwise():
    before = np.array([0.0, 1.0], dtype=np.float32)
    after = np.array([-0.0, 1.0], dtype=np.float32)  # equal as numbers, not as bits
    assert modified_input(["x"], [after], [before]) == "x"


def test_modified_input_names_the_first_changed_input(ref):
    changed = ref.copy()
    changed[0, 0] += 1
    assert modified_input(["lhs", "rhs"], [ref.copy(), changed], [ref, ref]) == "rhs"
