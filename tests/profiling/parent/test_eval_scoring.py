"""The verdict from a worker's raw result, and the evaluation config's call deadline."""

from __future__ import annotations

import pydantic
import pytest

from accelopt.backends.status import Status
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.scoring import verdict


@pytest.mark.parametrize("status", [s for s in Status if s is not Status.PASSED])
def test_a_failed_status_is_kept(status):
    judged = verdict(str(status), "why it failed", 1e-3, 1e-3)
    assert judged.status is status
    assert judged.error == "why it failed"
    assert judged.pct_of_peak is None


def test_check_only_is_passed_without_a_score():
    judged = verdict(None, "", None, 1e-3)
    assert (judged.status, judged.error, judged.pct_of_peak) == (Status.PASSED, "", None)


def test_at_105_percent_of_peak_is_passed():
    judged = verdict(None, "", 1.0, 1.05)
    assert judged.status is Status.PASSED
    assert judged.pct_of_peak == pytest.approx(1.05)
    assert judged.error == ""


def test_at_106_percent_of_peak_is_suspicious():
    judged = verdict(None, "", 1.0, 1.06)
    assert judged.status is Status.SUSPICIOUS
    assert judged.pct_of_peak == pytest.approx(1.06)
    assert "106%" in judged.error and "105%" in judged.error


def test_a_typical_kernel_is_passed_with_its_fraction():
    judged = verdict(None, "", 4e-3, 1e-3)
    assert judged.status is Status.PASSED
    assert judged.pct_of_peak == pytest.approx(0.25)


def test_zero_latency_is_suspicious():
    assert verdict(None, "", 0.0, 1e-3).status is Status.SUSPICIOUS


def test_call_timeout_has_a_floor():
    config = EvalConfig()
    assert config.call_timeout_s(1e-3) == config.call_timeout_floor_s == 10.0


def test_call_timeout_scales_with_the_roofline():
    config = EvalConfig()
    assert config.call_timeout_s(0.05) == pytest.approx(2000 * 0.05)


def test_call_timeout_custom():
    config = EvalConfig(call_timeout_floor_s=3.0, call_timeout_factor=100.0)
    assert config.call_timeout_s(1e-3) == 3.0
    assert config.call_timeout_s(0.1) == pytest.approx(10.0)


def test_config_is_frozen_and_strict():
    config = EvalConfig()
    with pytest.raises(pydantic.ValidationError):
        config.seeds = 3  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        EvalConfig(seedz=3)  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError):
        EvalConfig(seeds=0)


def test_config_round_trips_through_a_request():
    config = EvalConfig(seeds=2, check_only=True, call_timeout_floor_s=3.0)
    assert EvalConfig(**config.model_dump()) == config


def test_one_geomean_with_a_rule_for_missing_figures_said_by_its_caller():
    from accelopt.profiling.stats import geomean

    assert geomean([], skip_missing=True) is None
    assert geomean([0.5], skip_missing=True) == pytest.approx(0.5)
    assert geomean([0.1, 0.4], skip_missing=True) == pytest.approx(0.2)
    assert geomean([0.25, 0.0, None, 1.0], skip_missing=True) == pytest.approx(0.5)  # left out
    assert geomean([0.25, 0.0, 1.0]) is None and geomean([0.25, None]) is None  # none combined


def test_beating_the_roofline_blames_the_ceiling_unless_no_time_passed():
    from accelopt.profiling.parent.scoring import blames_the_ceiling

    judged = verdict(None, "", latency_s=1.0, peak_s=1.2)
    assert blames_the_ceiling(judged.status, judged.pct_of_peak)
    instant = verdict(None, "", latency_s=0.0, peak_s=1.2)
    assert instant.status is Status.SUSPICIOUS
    assert not blames_the_ceiling(instant.status, instant.pct_of_peak)
    assert not blames_the_ceiling(Status.PASSED, 0.5)


@pytest.mark.parametrize(
    ("status", "pct"),
    [(Status.PASSED, 0.9), (Status.INCORRECT, None), (Status.SUSPICIOUS, float("inf"))],
)
def test_other_verdicts_do_not_blame_the_ceiling(status, pct):
    from accelopt.profiling.parent.scoring import blames_the_ceiling

    assert not blames_the_ceiling(status, pct)
