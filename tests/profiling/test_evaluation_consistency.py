"""An ``Evaluation``'s status and the fields it carries tell one story: its validator refuses a
record that contradicts itself, wherever it is made or read back from (the cache, JSON)."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from accelopt.backends.status import Status
from accelopt.profiling.evaluation import Evaluation, stored

BASE: dict[str, Any] = {
    "problem": "silu",
    "workload": "small",
    "backend": "cpu",
    "kernel": "k",
    "kernel_hash": "h",
    "hardware": "hw",
    "status": Status.PASSED,
    "latency_s": 2e-4,
    "peak_s": 1e-4,
    "pct_of_peak": 0.5,
    "bound": "memory",
    "tolerance": 1e-5,
}


def test_a_consistent_evaluation_reads_back_as_written() -> None:
    evaluation = Evaluation(**BASE, ci_low_s=1.9e-4, ci_high_s=2.1e-4)
    assert Evaluation.model_validate_json(evaluation.model_dump_json()) == evaluation
    failed = Evaluation(
        **{
            **BASE,
            "status": Status.CRASH,
            "latency_s": None,
            "pct_of_peak": None,
            "error": "SIGSEGV",
        }
    )
    assert not failed.passed


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"error": "slow"}, "PASSED with an error"),
        ({"status": Status.INCORRECT}, "INCORRECT without saying why"),
        ({"latency_s": None}, "without a latency"),
        ({"status": Status.SUSPICIOUS, "error": "beats", "latency_s": None}, "without a latency"),
        ({"ci_low_s": 1e-4}, "one end of the latency's interval"),
        ({"ceiling": "calibrated"}, "without the control's roofline"),
    ],
)
def test_a_record_that_contradicts_itself_is_refused(change: dict[str, Any], says: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=says):
        Evaluation(**{**BASE, **change})
    stored = Evaluation(**BASE).model_dump(mode="json") | {
        k: (v.value if isinstance(v, Status) else v) for k, v in change.items()
    }
    with pytest.raises(pydantic.ValidationError, match=says):
        Evaluation.model_validate(stored)  # read back from the cache or a JSON file


def test_a_failure_nothing_explained_still_says_so() -> None:
    """An exception with no message (``str(exc) == ""``) still gives the verdict a reason, so
    scoring never makes a record its own validator refuses (a measurement lost to a crash)."""
    from accelopt.profiling.parent.scoring import verdict

    judged = verdict(Status.CRASH, "", None, 1e-4)
    assert judged.status is Status.CRASH and judged.error.startswith("CRASH, and neither")
    Evaluation(**{**BASE, "status": judged.status, "error": judged.error, "latency_s": None,
                  "pct_of_peak": None})  # fmt: skip


def test_a_failure_stored_before_every_failure_said_why_reads_back() -> None:
    """A user's older runs stay readable: the store reads records as they were written."""
    old = Evaluation(**{**BASE, "status": Status.CRASH, "error": "x", "latency_s": None,
                        "pct_of_peak": None}).model_dump(mode="json") | {"error": ""}  # fmt: skip
    assert stored(json.dumps(old)).error == ""
    with pytest.raises(pydantic.ValidationError, match="without saying why"):
        Evaluation.model_validate(old)
