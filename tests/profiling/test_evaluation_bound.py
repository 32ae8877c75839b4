"""``Evaluation.bound`` is a ``Bound``: validated from the strings evaluations always held, and
written back as the same strings (JSON, and the store's cache)."""

from __future__ import annotations

import json

import pydantic
import pytest

from accelopt.backends.status import Status
from accelopt.hardware.roofline import BOUNDS, Bound
from accelopt.profiling.evaluation import Evaluation


def _evaluation(bound: object) -> Evaluation:
    return Evaluation(
        problem="silu", workload="small", backend="cpu", kernel="k", kernel_hash="h",
        hardware="hw", status=Status.PASSED, latency_s=2e-4, peak_s=1e-4, pct_of_peak=0.5,
        bound=bound, tolerance=1e-5,
    )  # fmt: skip


@pytest.mark.parametrize("text", ["matmul", "vector", "memory"])
def test_the_strings_validate_to_members_and_dump_back(text):
    evaluation = _evaluation(text)
    assert evaluation.bound is Bound(text) and evaluation.bound == text
    assert json.loads(evaluation.model_dump_json())["bound"] == text
    assert evaluation.model_dump(mode="json")["bound"] == text
    assert f"{evaluation.bound}-bound" == f"{text}-bound"
    again = Evaluation.model_validate_json(evaluation.model_dump_json())
    assert again == evaluation and again.bound is Bound(text)


def test_an_unknown_bound_is_refused():
    with pytest.raises(pydantic.ValidationError):
        _evaluation("gpu")


def test_ties_still_go_to_matmul_then_vector_then_memory():
    assert BOUNDS == (Bound.MATMUL, Bound.VECTOR, Bound.MEMORY)
