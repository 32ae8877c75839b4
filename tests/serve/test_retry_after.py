"""`Retry-After` on a full queue comes from how fast the queue drains, not from a fixed guess: a
burst of requests beyond the queue is told to come back about when the queue has drained."""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")

from accelopt.backends.status import Status
from accelopt.problems import load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.serve.api import Views, create_app
from accelopt.serve.jobs import DrainRate, EvaluationJobs

SILU = load_problem("silu")
EVALUATION_S = 0.15


class SteadyProfiler:
    """Takes ``EVALUATION_S`` per kernel, then PASSED."""

    hardware = None  # no spec: the JSON names no cached ceiling's figure

    def evaluate(self, kernel, problem, workload) -> Evaluation:
        time.sleep(EVALUATION_S)
        return Evaluation(
            problem=problem.name, workload=workload, backend="cpu", kernel=kernel.name,
            kernel_hash=kernel.hash, hardware="test", status=Status.PASSED, latency_s=1e-3,
            peak_s=1e-4, pct_of_peak=0.1, bound="memory", tolerance=1e-5,
        )  # fmt: skip


def _post(base: str, i: int) -> tuple[int, str | None]:
    body = json.dumps({"problem": "silu", "source": f"void kernel(void) {{ /* {i} */ }}"})
    request = urllib.request.Request(f"{base}/v1/evaluations", body.encode(),
                                     {"content-type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, None
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("retry-after")


def test_a_burst_beyond_the_queue_is_told_to_retry_when_it_has_drained(serve_in_thread):
    profiler = SteadyProfiler()
    jobs = EvaluationJobs(lambda name: SILU, lambda backend: profiler, capacity=2, max_queued=4)  # type: ignore[arg-type,return-value]
    views = Views(lambda: [], lambda n: {}, lambda: [], lambda r: None)
    try:
        with serve_in_thread(create_app(jobs, views, None)) as base:
            start = time.monotonic()
            with ThreadPoolExecutor(40) as pool:
                answers = list(pool.map(lambda i: _post(base, i), range(40)))
            while jobs.counts()["done"] < sum(1 for code, _ in answers if code == 202):
                assert time.monotonic() - start < 20
                time.sleep(0.02)
            drained_s = time.monotonic() - start
    finally:
        jobs.close()
    refused = [int(after) for code, after in answers if code == 429 and after is not None]
    assert len(refused) == sum(1 for code, _ in answers if code == 429) >= 10
    assert max(refused) <= math.ceil(drained_s) + 1, (refused, drained_s)


def test_the_estimate_follows_the_durations_of_late():
    rate = DrainRate()
    assert rate.retry_after_s(5, 2) == 1  # nothing measured, nothing running long: soon
    assert rate.retry_after_s(5, 2, running_for_s=8.0) == 20  # the running one is a lower bound
    rate.observe(10.0)
    assert rate.retry_after_s(5, 2) == 25  # 10 s each, 5 ahead, 2 at a time
    for _ in range(20):
        rate.observe(0.1)
    assert rate.retry_after_s(5, 2) == 1  # they got fast: the old slow one is forgotten
    rate.observe(1000.0)
    assert rate.retry_after_s(64, 1) == 300  # never more than five minutes
