"""Describing wrong outputs: which elements are wrong, where (a pattern), and their values."""

from __future__ import annotations

import numpy as np
import pytest

from accelopt.profiling.worker.correctness import (
    MAX_LINE_CHARS,
    check_outputs,
    coordinates,
    describe_mismatch,
    mismatch_pattern,
    wrong_elements,
)

TOL = 2e-5


@pytest.fixture
def ref() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((64, 48))


@pytest.fixture
def ref3() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((4, 16, 8))


def failed(out: np.ndarray, ref: np.ndarray, name: str = "out") -> str:
    error = check_outputs([name], [out.astype(np.float32)], [ref], TOL).error
    assert error, "the check should fail"
    return error


# -- wrong_elements ---------------------------------------------------------------------------


def test_wrong_is_off_by_more_than_tol_times_expected_plus_rms():
    ref = np.array([1.0, 1.0, 1.0, 1.0])  # rms 1: the bound is tol * (1 + 1)
    out = ref + np.array([0.0, 1.9 * TOL, 2.1 * TOL, np.nan])
    assert wrong_elements(out, ref, TOL).tolist() == [False, False, True, True]


def test_wrong_elements_near_zero_are_judged_against_the_rms():
    ref = np.array([0.0, 10.0])  # rms ~7.07: a rounding error on the zero is not wrong
    out = np.array([1e-6, 10.0])
    assert not wrong_elements(out, ref, TOL).any()


def test_a_zero_reference_flags_any_difference():
    assert wrong_elements(np.array([0.0, 1e-30]), np.zeros(2), TOL).tolist() == [False, True]


def test_the_rms_counts_only_finite_reference_values():
    ref = np.array([1.0, np.inf, 1.0])  # rms 1: the bound of the last element is 4e-5
    out = np.array([1.0, np.inf, 1.0 + 3e-5])
    assert wrong_elements(out, ref, TOL).tolist() == [False, True, False]


def test_a_large_output_is_described_in_chunks():
    ref = np.random.default_rng(4).uniform(1.0, 2.0, 300_001)  # several chunks
    out = -ref
    out[-2:] = np.nan
    text = describe_mismatch("v", out, ref, TOL)
    assert text.startswith("300001 of 300001 elements wrong: every element; NaN in 2 elements")
    out = ref * 3
    assert "each is 3 times the expected value" in describe_mismatch("v", out, ref, TOL)


def test_coordinates_are_in_the_outputs_shape():
    assert coordinates("out", (64, 48), 17 * 48 + 3) == "out[17, 3]"
    assert coordinates("y", (4, 16, 8), 2 * 128 + 5 * 8 + 1) == "y[2, 5, 1]"
    assert coordinates("s", (), 0) == "s"


# -- patterns ---------------------------------------------------------------------------------


def test_a_wrong_row(ref):
    out = ref.copy()
    out[17] = 0
    error = failed(out, ref)
    assert error.splitlines()[0].startswith("output 'out': relative L2 error")
    assert "48 of 3072 elements wrong: all of row 17 (out[17, :]); got 0 in all of them" in error
    assert "out[17, 0]: expected 0.23463, got 0; out[17, 1]: expected -0.829949, got 0;" in error


def test_a_wrong_last_row(ref):
    out = ref.copy()
    out[-1] += 1
    assert "all of row 63 (the last; out[63, :])" in failed(out, ref)


def test_wrong_last_columns(ref):
    out = ref.copy()
    out[:, -3:] *= 2
    error = failed(out, ref)
    assert "192 of 3072 elements wrong: all of the last 3 columns (45-47; out[:, 45:48])" in error
    assert "each is 2 times the expected value" in error
    assert "first wrong: out[0, 45]: expected" in error


def test_a_single_wrong_element(ref):
    out = ref.copy()
    out[5, 7] += 1
    lines = failed(out, ref).splitlines()
    assert lines[1] == "1 of 3072 elements wrong"
    assert lines[2] == f"first wrong: out[5, 7]: expected {ref[5, 7]:.6g}, got {out[5, 7]:.6g}"


def test_every_element(ref):
    out = ref + 1.0
    assert "3072 of 3072 elements wrong: every element" in failed(out, ref)


def test_almost_every_element(ref):
    out = ref + 1.0
    out[3, 4] = ref[3, 4]
    assert "3071 of 3072 elements wrong: all but 1 element" in failed(out, ref)


def test_irregular_elements_of_a_vector_have_no_pattern():
    mask = np.zeros(100, dtype=bool)
    mask[[3, 10, 11, 50]] = True
    assert mismatch_pattern("v", mask) == ""
    mask[:] = False
    mask[10:40:3] = True
    assert mismatch_pattern("v", mask) == "all of every 3rd element from 10 to 37 (10 elements)"


def test_a_block_is_described_by_its_rows_and_columns(ref):
    out = ref.copy()
    out[10:20, 5:9] += 1
    assert "40 of 3072 elements wrong: only in rows 10-19, columns 5-8" in failed(out, ref)


def test_every_other_row(ref):
    out = ref.copy()
    out[1::2] = 0
    assert "all of every 2nd row from 1 to 63 (32 rows)" in failed(out, ref)


def test_3d_a_row_of_every_matrix(ref3):
    out = ref3.copy()
    out[:, 3, :] += 1
    error = failed(out, ref3, "y")
    assert "32 of 512 elements wrong: all of row 3 (y[:, 3, :])" in error
    assert "first wrong: y[0, 3, 0]: expected" in error


def test_3d_a_whole_slice(ref3):
    out = ref3.copy()
    out[2] += 1
    assert "128 of 512 elements wrong: all of slice 2 (y[2, :, :])" in failed(out, ref3, "y")


def test_3d_nan_in_the_last_columns(ref3):
    out = ref3.copy()
    out[..., -2:] = np.nan
    error = failed(out, ref3, "y")
    assert error.splitlines()[0] == "output 'y' has 128 of 512 values NaN (partly written, or NaN)"
    assert "all of the last 2 columns (6-7; y[:, :, 6:8]); NaN in 128 elements" in error
    assert f"first wrong: y[0, 0, 6]: expected {ref3[0, 0, 6]:.6g}, got nan; y[0, 0, 7]" in error


def test_nan_in_a_block(ref):
    out = ref.copy()
    out[:2, :3] = np.nan
    error = failed(out, ref)
    assert "6 of 3072 elements wrong: only in the first 2 rows (0-1), the first 3 columns" in error
    assert "NaN in 6 elements" in error


def test_an_output_never_written_gets_no_details(ref):
    error = failed(np.full_like(ref, np.nan), ref)
    assert error == "output 'out' was not written (still NaN after the call)"


def test_infinite_values_are_located(ref):
    out = ref.copy()
    out[4, 4] = np.inf
    error = failed(out, ref)
    assert error.splitlines()[1:] == [
        "1 of 3072 elements wrong",  # a single element: its quoted value says the rest
        f"first wrong: out[4, 4]: expected {ref[4, 4]:.6g}, got inf",
    ]


def test_no_wrong_element_quotes_the_largest_errors():
    ref = np.ones(100)
    out = ref + 3e-5  # every element just under its bound 2e-5 * (1 + 1); L2 error 3e-5
    error = describe_mismatch("v", out, ref, TOL)
    assert error.splitlines()[0].startswith("no element is off by more than")
    assert error.splitlines()[1].startswith("largest: v[")


def test_1d_last_elements():
    ref = np.arange(1.0, 17.0)
    out = ref.copy()
    out[-3:] = 0
    assert "all of the last 3 elements (13-15; v[13:16])" in describe_mismatch("v", out, ref, TOL)


def test_pattern_of_none_or_one_is_empty():
    mask = np.zeros((4, 4), dtype=bool)
    assert mismatch_pattern("o", mask) == ""
    mask[1, 1] = True
    assert mismatch_pattern("o", mask) == ""


def test_scattered_elements_list_their_rows_and_columns():
    mask = np.zeros((8, 8), dtype=bool)
    mask[[0, 3, 7], [1, 6, 2]] = True
    assert mismatch_pattern("o", mask) == (
        "only in 3 rows (0, 3, 7, ...), 3 columns (1, 2, 6, ...)"
    )


# -- bounds and determinism -------------------------------------------------------------------


def test_the_description_is_short(ref):
    big = np.random.default_rng(3).standard_normal((512, 1536)) * 1e30
    out = big * 3
    error = failed(out, big, "a_rather_long_output_name" * 4)
    assert len(error.splitlines()) == 3
    assert all(len(line) <= MAX_LINE_CHARS for line in error.splitlines())


def test_the_description_is_deterministic(ref):
    out = ref.copy()
    out[3:9, ::5] = 0
    assert failed(out, ref) == failed(out.copy(), ref.copy())
