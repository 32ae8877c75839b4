"""A run's summary (``search.summary.RunSummary``) is a record; its JSON is what the CLI always
wrote: the same keys, in the same order, the same values."""

from __future__ import annotations

import dataclasses
import json

import pytest

from accelopt.backends.status import Status
from accelopt.hardware.roofline import Bound
from accelopt.llm.client import Usage
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.run import OptimizeResult
from accelopt.search.selection import Candidate
from accelopt.search.summary import KernelSummary, RunSummary, run_summary
from accelopt.search.workloads import Generalization, RunWorkloads
from accelopt.store.records import KernelOrigin, KernelRecord, RunRecord, RunStatus


def _candidate(kernel_hash: str, latency: float, bound: str = "memory") -> Candidate:
    record = KernelRecord(kernel_hash, "void f(void) {}", "cpu", 0, KernelOrigin.BASELINE)
    evaluation = Evaluation(
        problem="silu", workload="small", backend="cpu", kernel="k", kernel_hash=kernel_hash,
        hardware="hw", status=Status.PASSED, latency_s=latency, peak_s=1e-4,
        pct_of_peak=1e-4 / latency, bound=bound, tolerance=1e-5,
    )  # fmt: skip
    return Candidate(record, evaluation)


def _result(config: dict | None = None) -> OptimizeResult:
    run = RunRecord("abc123", "silu", "small", "cpu", "hw", "beam", config or {},
                    status=RunStatus.FINISHED)  # fmt: skip
    usage = {"planner": Usage(calls=2, tokens_in=30, tokens_out=5, cost_usd=0.25),
             "executor": Usage(calls=1, failed=1, unknown_cost=1)}  # fmt: skip
    return OptimizeResult(run, RunStatus.FINISHED, _candidate("base", 4e-4),
                          _candidate("best", 2e-4), usage)  # fmt: skip


# What ``run_summary`` returned when it built the dict itself.
OLD = {
    "run": "abc123",
    "problem": "silu",
    "workload": "small",
    "workloads": ["small"],
    "held_out": [],
    "status": "finished",
    "baseline": {"latency_s": 4e-4, "pct_of_peak": 0.25, "hash": "base"},
    "best": {"latency_s": 2e-4, "pct_of_peak": 0.5, "hash": "best"},
    "speedup": 2.0,
    "bound": "memory",
    "usage": {
        "planner": {
            "calls": 2,
            "failed": 0,
            "replayed": 0,
            "tokens_in": 30,
            "tokens_out": 5,
            "cost_usd": 0.25,
            "unknown_cost": 0,
        },
        "executor": {
            "calls": 1,
            "failed": 1,
            "replayed": 0,
            "tokens_in": 0,
            "tokens_out": 0,
            "cost_usd": 0.0,
            "unknown_cost": 1,
        },
    },
}


def _dumps(payload: object) -> str:
    return json.dumps(payload, indent=2, default=str)  # as ``cli.output.write_json``


def test_the_summary_is_a_frozen_record_with_the_old_json():
    summary = run_summary(_result())
    assert isinstance(summary, RunSummary) and summary.status is RunStatus.FINISHED
    assert summary.best == KernelSummary(2e-4, 0.5, "best") and summary.bound is Bound.MEMORY
    assert _dumps(summary.as_json()) == _dumps(OLD)
    assert list(summary.as_json()) == list(OLD)
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.status = RunStatus.FAILED  # type: ignore[misc]


def test_what_the_cli_adds_comes_after_the_usage_as_it_did():
    config = {"workloads": ["small", "tiny"], "held_out": ["cpu"]}
    summary = run_summary(_result(config))
    figures = Generalization(RunWorkloads(("small", "tiny"), ("cpu",)), (), ())
    whole_run = {"planner": Usage(calls=5, tokens_in=99, cost_usd=1.5)}
    shown = dataclasses.replace(
        summary, usage=whole_run, best_kernel_path="/ws/best/abc123-silu.c",
        generalization=figures,
    )  # fmt: skip
    old = OLD | {
        "workloads": ["small", "tiny"],
        "held_out": ["cpu"],
        "usage": {"planner": {"calls": 5, "failed": 0, "replayed": 0, "tokens_in": 99,
                              "tokens_out": 0, "cost_usd": 1.5, "unknown_cost": 0}},
        "best_kernel_path": "/ws/best/abc123-silu.c",
        "generalization": figures.as_json(),
    }  # fmt: skip
    assert _dumps(shown.as_json()) == _dumps(old)
    assert list(shown.as_json())[-3:] == ["usage", "best_kernel_path", "generalization"]
