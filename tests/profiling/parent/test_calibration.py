"""Calibrated % of peak and the intervals reported with it (``parent/calibration.py``): pure."""

from __future__ import annotations

import math

import pytest

from accelopt.profiling.parent.calibration import (
    calibrate,
    latency_half_width,
    mean_half_width,
    slice_figures,
    t95,
    valid_rates,
)

WORK = 1e9  # bytes the problem moves


def test_a_slowdown_that_hits_kernel_and_control_alike_cancels():
    quiet, _ = calibrate(WORK, 0.050, 0.01, [40e9, 40e9, 40e9], [0.050, 0.050], drift=0.0)
    # a neighbour takes 30 % of the memory bandwidth: the kernel and the control both slow down
    busy, _ = calibrate(WORK, 0.050 / 0.7, 0.01, [28e9, 28e9, 28e9], [0.0714, 0.0714], 0.0)
    assert quiet is not None and busy is not None
    assert busy.pct == pytest.approx(quiet.pct, rel=1e-3)
    assert quiet.pct == pytest.approx(WORK / 40e9 / 0.050)
    assert quiet.peak_s == pytest.approx(WORK / 40e9)  # the % agrees with its peak time


def test_controls_disturbed_by_the_kernel_leave_the_figure_uncalibrated():
    found, why = calibrate(WORK, 0.05, 0.01, [None, 40e9, None], [0.05, 0.05], 0.0)
    assert found is None and "1 of 3 controls" in why
    assert valid_rates([None, 1.0, 2.0])[0] == [1.0, 2.0]


def test_a_kernel_beating_its_control_is_scored_against_the_cached_ceiling():
    found, why = calibrate(WORK, 0.01, 0.01, [40e9, 40e9], [0.01], 0.0)  # 250 % of the control
    assert found is None and "does not bound it" in why


def test_the_machines_drift_widens_the_interval_of_a_kernel_far_from_its_bound():
    rates, slices = [40e9] * 4, [0.25, 0.25, 0.25]  # 10 % of the control: others limit it
    far, _ = calibrate(WORK, 0.25, 0.01, rates, slices, drift=0.2)
    near, _ = calibrate(WORK, 0.0263, 0.01, rates, [0.0263] * 3, drift=0.2)  # 95 %
    assert far is not None and near is not None
    assert (far.high - far.low) / far.pct > 0.3  # about +-0.2 * 0.9
    assert (near.high - near.low) / near.pct < 0.05  # the control tracks what limits it


def test_the_slices_own_figures_set_the_interval_when_they_disagree():
    steady, _ = calibrate(WORK, 0.05, 0.001, [40e9] * 5, [0.05] * 4, 0.0)
    jumpy, _ = calibrate(WORK, 0.05, 0.001, [40e9] * 5, [0.04, 0.06, 0.04, 0.06], 0.0)
    assert steady is not None and jumpy is not None
    assert jumpy.high - jumpy.low > 10 * (steady.high - steady.low)


def test_each_slice_is_scored_against_the_controls_on_either_side():
    figures = slice_figures(WORK, [40e9, None, 20e9], [0.05, 0.05])
    assert figures == [pytest.approx(WORK / 40e9 / 0.05), pytest.approx(WORK / 20e9 / 0.05)]


def test_intervals_and_quantiles():
    assert t95(1) == pytest.approx(12.71) and t95(11) == pytest.approx(2.23) and t95(99) == 1.96
    assert math.isinf(t95(0))
    assert mean_half_width([1.0]) is None and mean_half_width([1.0, 1.0]) == 0.0
    assert latency_half_width(0.03, 0.04) == pytest.approx(0.05)
