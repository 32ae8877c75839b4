"""The one latency estimator (``stats.ESTIMATOR``): ``MEDIAN`` gives the numbers the harness has
always given (the median, the order-statistic ranks), and every consumer goes through it, so
another estimator, installed at the one seam, changes what each of them computes."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from accelopt.profiling import stats
from accelopt.profiling.parent import calibration
from accelopt.profiling.worker import freshness
from accelopt.profiling.worker.pacing import Precision

SKEWED = [1.0, 1.0, 1.0, 1.0, 1.0, 1.1, 1.2, 1.3, 5.0, 9.0]  # a median of 1.05, a mean of 2.26


class TrimmedMean:
    """The mean of the samples without the lowest and highest tenth, with a normal interval."""

    name = "trimmed mean"
    min_samples = 4

    def _kept(self, samples: stats.Samples) -> list[float]:
        ordered = sorted(float(s) for s in samples)
        cut = len(ordered) // 10
        return ordered[cut : len(ordered) - cut]

    def point(self, samples: stats.Samples) -> float:
        return statistics.fmean(self._kept(samples))

    def estimate(self, samples: stats.Samples) -> stats.Estimate:
        kept = self._kept(samples)
        mean = statistics.fmean(kept)
        half = stats.Z95 * statistics.pstdev(kept) / math.sqrt(len(kept))
        return stats.Estimate(mean, mean - half, mean + half)


@pytest.fixture
def trimmed(monkeypatch: pytest.MonkeyPatch) -> TrimmedMean:
    estimator = TrimmedMean()
    monkeypatch.setattr(stats, "ESTIMATOR", estimator)
    return estimator


def test_the_median_is_the_estimator_and_its_numbers_are_the_median_s():
    assert stats.ESTIMATOR is stats.MEDIAN
    samples = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0]
    found = stats.estimate(samples)
    ordered = sorted(samples)
    low, high = stats.median_ci_ranks(len(samples))
    assert found == stats.Estimate(float(np.median(samples)), ordered[low], ordered[high])
    assert stats.point(samples) == statistics.median(samples)
    assert stats.interval(samples) == (found.low, found.high)
    assert found.half_width == pytest.approx((found.high - found.low) / (2 * found.point))
    assert math.isinf(stats.ci_half_width(samples[:5]))  # MEDIAN's min_samples: 6


def test_the_estimate_s_half_width_is_relative_to_its_point():
    assert stats.Estimate(2.0, 1.9, 2.1).half_width == pytest.approx(0.05)
    assert stats.Estimate(0.0, -1.0, 1.0).half_width == 0.0


def test_summarize_goes_through_the_estimator(trimmed):
    timing = stats.summarize(SKEWED)
    assert timing.latency_s == pytest.approx(trimmed.point(SKEWED))
    assert timing.latency_s != pytest.approx(stats.MEDIAN.point(SKEWED))
    found = trimmed.estimate(SKEWED)
    assert (timing.ci_low_s, timing.ci_high_s) == (found.low, found.high)
    assert timing.min_s == 1.0 and timing.calls == len(SKEWED)


def test_ratio_estimate_goes_through_the_estimator(trimmed):
    ratio, ci = stats.ratio_estimate(SKEWED)
    assert ratio == pytest.approx(trimmed.point(SKEWED))
    assert ci == pytest.approx(trimmed.estimate(SKEWED).half_width)
    _, few = stats.ratio_estimate(SKEWED[:4])  # TrimmedMean's min_samples, below MEDIAN's
    assert few == pytest.approx(trimmed.estimate(SKEWED[:4]).half_width)


def test_the_stop_rule_goes_through_the_estimator(monkeypatch):
    # half the batches at 1 ms, half at 2 ms: the median's interval spans both, a mean's is narrow
    samples = [1e-3, 2e-3] * 200
    assert not Precision(0.05)(samples, 0.0)
    monkeypatch.setattr(stats, "ESTIMATOR", TrimmedMean())
    assert Precision(0.05)(samples, 0.0)


def test_the_freshness_audit_goes_through_the_estimator(monkeypatch):
    # a few sparse rounds far faster: the median does not see them, a mean does
    sparse, full = [0.1] * 4 + [1.0] * 5, [1.0] * 8
    assert not freshness.confirms(sparse, full)
    monkeypatch.setattr(stats, "ESTIMATOR", TrimmedMean())
    assert freshness.confirms(sparse, full)


def test_calibration_goes_through_the_estimator(trimmed):
    rates = [1.0, 1.0, 1.0, 4.0]
    calibrated, why = calibration.calibrate(1.0, 1.0, 0.0, rates, [], 0.0)
    assert calibrated is not None, why
    assert calibrated.rate == pytest.approx(trimmed.point(rates))
