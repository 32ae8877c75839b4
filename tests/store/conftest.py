"""Fixtures for the store tests: a fresh store in tmp_path, and record factories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from accelopt.backends.status import Status
from accelopt.llm.records import LLMCall
from accelopt.memory.records import Experience, Lesson
from accelopt.profiling.evaluation import Evaluation
from accelopt.store.records import KernelRecord, RunRecord
from accelopt.store.store import Store


@pytest.fixture
def store(tmp_path) -> Iterator[Store]:
    with Store.open(tmp_path / "ws") as s:
        yield s


def _run(id: str = "run-0001", **kw: Any) -> RunRecord:
    fields: dict[str, Any] = {
        "problem": "matmul",
        "workload": "cpu",
        "backend": "cpu",
        "hardware": "test-cpu",
        "strategy": "beam",
        "spec": {"beam": 2, "plans": 3, "models": {"planner": "m1"}, "ratio": 0.5},
    }
    fields.update(kw)
    return RunRecord(id=id, **fields)


def _kernel(hash: str = "k0", **kw: Any) -> KernelRecord:
    fields: dict[str, Any] = {
        "source": f"void kernel(void) {{ /* {hash} */ }}",
        "backend": "cpu",
        "iteration": 0,
        "origin": "baseline",
    }
    fields.update(kw)
    return KernelRecord(hash=hash, **fields)


def _evaluation(kernel_hash: str = "k0", **kw: Any) -> Evaluation:
    fields: dict[str, Any] = {
        "problem": "matmul",
        "workload": "cpu",
        "backend": "cpu",
        "kernel": "baseline.c",
        "hardware": "test-cpu",
        "status": Status.PASSED,
        "latency_s": 1.5e-3,
        "min_s": 1.4e-3,
        "noise": 0.02,
        "calls": 50,
        "peak_s": 1e-4,
        "pct_of_peak": 1e-4 / 1.5e-3,
        "bound": "matmul",
        "max_rel_err": 1e-7,
        "tolerance": 1e-4,
        "seeds": [1, 2, 3],
        "threads": 2,
        "log": "ok\n",
    }
    fields.update(kw)
    return Evaluation(kernel_hash=kernel_hash, **fields)


def _call(key: str = "key-a", **kw: Any) -> LLMCall:
    fields: dict[str, Any] = {
        "id": f"id-{key}-{kw.get('error', '')}-{kw.get('replayed', False)}",
        "agent": "planner",
        "model": "m1",
        "base_url": "http://localhost:1/v1",
        "messages": [{"role": "user", "content": "make it fast ✓"}],
        "params": {"temperature": 0.7},
        "reply": "a plan",
        "tokens_in": 100,
        "tokens_out": 20,
        "cost_usd": 0.01,
        "started_at": "2025-01-01T00:00:00+00:00",
    }
    fields.update(kw)
    return LLMCall(key=key, **fields)


def _experience(title: str = "a lesson", **kw: Any) -> Experience:
    lesson = Lesson(
        title=title,
        description=kw.pop("description", "why it helps"),
        before=kw.pop("before", "for (i...)"),
        after=kw.pop("after", "#pragma omp parallel for"),
    )
    fields: dict[str, Any] = {
        "kind": "positive",
        "speedup": 1.8,
        "problem": "matmul",
        "backend": "cpu",
        "hardware": "test-cpu",
        "model": "m1",
        "run_id": "run-0001",
        "slow_hash": "k0",
        "fast_hash": "k1",
    }
    fields.update(kw)
    return Experience(lesson=lesson, **fields)


@pytest.fixture
def make_run() -> Callable[..., RunRecord]:
    return _run


@pytest.fixture
def make_kernel() -> Callable[..., KernelRecord]:
    return _kernel


@pytest.fixture
def make_evaluation() -> Callable[..., Evaluation]:
    return _evaluation


@pytest.fixture
def make_call() -> Callable[..., LLMCall]:
    return _call


@pytest.fixture
def make_experience() -> Callable[..., Experience]:
    return _experience
