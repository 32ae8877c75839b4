"""An evaluation with some fields changed, validated as a stored one is (``model_copy`` skips
the validators: a fake could then say what no real evaluation says). Fields are named as the
JSON has them (``cached_pct``, ``calibrated_peak_s``...)."""

from __future__ import annotations

from typing import Any

from accelopt.profiling.evaluation import Evaluation


def changed(evaluation: Evaluation, **fields: Any) -> Evaluation:
    return Evaluation.model_validate(evaluation.model_dump() | fields)


def flat(evaluation: Evaluation, field: str) -> Any:
    """A field as the JSON a user reads has it (``cached_pct`` is ``cached.pct``)."""
    return evaluation.model_dump()[field]
