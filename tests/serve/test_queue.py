"""The evaluation queue behind the API: bounded (a full queue answers 429 with Retry-After),
every accepted request answered, and a service failure reported on the job, not lost. The
profiler is a stand-in that waits to be released, served by a real uvicorn in this process."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi")

from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.problems import load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.serve.api import Views, create_app
from accelopt.serve.jobs import EvaluationJobs

SILU = load_problem("silu")


class HeldProfiler:
    """Evaluates nothing until released; then PASSED (or raises for the source 'lost')."""

    hardware = None  # no spec: the JSON names no cached ceiling's figure

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = 0

    def evaluate(self, kernel, problem, workload) -> Evaluation:
        self.started += 1
        self.release.wait(30)
        if "lost" in kernel.source:
            raise UserError("lost the Ray cluster at 10.0.0.1:6379")
        return Evaluation(
            problem=problem.name, workload=workload, backend="cpu", kernel=kernel.name,
            kernel_hash=kernel.hash, hardware="test", status=Status.PASSED, latency_s=1e-3,
            peak_s=1e-4, pct_of_peak=0.1, bound="memory", tolerance=1e-5,
        )  # fmt: skip


def load(name: str):
    if name != "silu":
        raise UserError(f"unknown problem {name!r}")
    return SILU


@pytest.fixture()
def served(serve_in_thread) -> Iterator[tuple[str, HeldProfiler]]:
    profiler = HeldProfiler()

    def profiler_for(backend: str) -> HeldProfiler:
        return profiler

    jobs = EvaluationJobs(load, profiler_for, capacity=1, max_queued=2)  # type: ignore[arg-type]
    views = Views(lambda: [], lambda n: {}, lambda: [], lambda r: None)
    try:
        with serve_in_thread(create_app(jobs, views, None)) as url:
            yield url, profiler
            profiler.release.set()  # let a held job end before the server does
    finally:
        profiler.release.set()
        jobs.close()


def post(base: str, source: str) -> tuple[int, dict, dict]:
    body = json.dumps({"problem": "silu", "source": source}).encode()
    request = urllib.request.Request(f"{base}/v1/evaluations", body,
                                     {"content-type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def get(base: str, path: str) -> dict:
    with urllib.request.urlopen(f"{base}{path}", timeout=10) as r:
        return json.loads(r.read())


def test_a_full_queue_answers_429_and_every_accepted_request_finishes(served):
    base, profiler = served
    accepted = [post(base, f"void kernel(void) {{ /* {i} */ }}") for i in range(3)]
    assert [a[0] for a in accepted] == [202, 202, 202]  # one running, two waiting
    status, headers, body = post(base, "void kernel(void) { /* 4 */ }")
    assert status == 429 and "queue is full" in body["detail"]
    assert 1 <= int(headers["retry-after"]) <= 300
    assert get(base, "/v1/health")["jobs"] == {"queued": 2, "running": 1, "done": 0}
    profiler.release.set()
    ids = [a[2]["id"] for a in accepted]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        states = [get(base, f"/v1/evaluations/{i}") for i in ids]
        if all(s["state"] == "done" for s in states):
            break
        time.sleep(0.05)
    assert all(s["result"]["status"] == "PASSED" for s in states)
    assert post(base, "void kernel(void) { /* 5 */ }")[0] == 202  # room again


def test_a_service_failure_is_reported_on_the_job(served):
    base, profiler = served
    profiler.release.set()
    _, _, job = post(base, "void kernel(void) { /* lost */ }")
    deadline = time.monotonic() + 20
    while (state := get(base, f"/v1/evaluations/{job['id']}"))["state"] != "done":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert state["result"] is None and state["error"].startswith("lost the Ray cluster")
