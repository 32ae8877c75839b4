"""Triton kernels over the API: a Triton kernel is Python, so `accelopt serve` refuses it (403,
one sentence) before anything is looked up, made or queued, GPU or not, unless the operator set
ACCELOPT_SERVE_TRITON=1; then it takes the usual path, and the server warns on stderr at start."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi")

from accelopt import settings
from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.problems import load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.serve.api import TRITON_WARNING, Views, create_app
from accelopt.serve.jobs import TRITON_REFUSED, EvaluationJobs

SILU = load_problem("silu")
TRITON_SOURCE = "import os\nos.system('touch /tmp/pwned')\n"  # what a hostile client might send
TOKEN = "t0ken-for-the-triton-tests-0123"


class CountingProfiler:
    """Counts what it is asked to evaluate; answers PASSED at once."""

    hardware = None  # no spec: the JSON names no cached ceiling's figure

    def __init__(self) -> None:
        self.evaluated: list[str] = []

    def evaluate(self, kernel, problem, workload) -> Evaluation:
        self.evaluated.append(kernel.backend)
        return Evaluation(
            problem=problem.name, workload=workload, backend=kernel.backend, kernel=kernel.name,
            kernel_hash=kernel.hash, hardware="test", status=Status.PASSED, latency_s=1e-3,
            peak_s=1e-4, pct_of_peak=0.1, bound="memory", tolerance=1e-5,
        )  # fmt: skip


class Fakes:
    def __init__(self) -> None:
        self.profiler = CountingProfiler()
        self.loaded: list[str] = []
        self.made_for: list[str] = []

    def load(self, name: str):
        self.loaded.append(name)
        if name != "silu":
            raise UserError(f"unknown problem {name!r}")
        return SILU

    def profiler_for(self, backend: str) -> CountingProfiler:
        self.made_for.append(backend)
        return self.profiler


@pytest.fixture()
def served(serve_in_thread) -> Iterator[tuple[str, Fakes, EvaluationJobs]]:
    fakes = Fakes()
    jobs = EvaluationJobs(fakes.load, fakes.profiler_for, capacity=1)  # type: ignore[arg-type]
    views = Views(lambda: [], lambda n: {}, lambda: [], lambda r: None)
    try:
        with serve_in_thread(create_app(jobs, views, TOKEN)) as url:
            yield url, fakes, jobs
    finally:
        jobs.close()


def post(base: str, payload: dict) -> tuple[int, dict]:
    headers = {"content-type": "application/json", "authorization": f"Bearer {TOKEN}"}
    request = urllib.request.Request(f"{base}/v1/evaluations", json.dumps(payload).encode(),
                                     headers)  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def triton(problem: str = "silu") -> dict:
    return {"problem": problem, "backend": "triton", "source": TRITON_SOURCE}


def test_a_triton_kernel_is_refused_before_anything_is_made_or_queued(served, monkeypatch):
    monkeypatch.delenv("ACCELOPT_SERVE_TRITON", raising=False)
    base, fakes, jobs = served
    for payload in (triton(), triton("nope"), {**triton(), "backend": " Triton"}):
        status, body = post(base, payload)
        assert (status, body) == (403, {"detail": TRITON_REFUSED}), payload
    assert fakes.loaded == [] and fakes.made_for == [] and fakes.profiler.evaluated == []
    assert jobs.counts() == {"queued": 0, "running": 0, "done": 0}
    assert post(base, {"problem": "silu", "source": "void kernel(void) {}"})[0] == 202  # cpu: on


def test_the_refusal_does_not_depend_on_a_gpu(served, monkeypatch):
    monkeypatch.delenv("ACCELOPT_SERVE_TRITON", raising=False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the interpreter would not help either
    base, fakes, _ = served
    assert post(base, triton()) == (403, {"detail": TRITON_REFUSED})
    assert fakes.made_for == []


@pytest.mark.parametrize("value", ["0", "", "no", "false"])
def test_only_an_explicit_opt_in_counts(value, monkeypatch):
    monkeypatch.setenv("ACCELOPT_SERVE_TRITON", value)
    assert settings.serve_triton() is False


def test_with_the_opt_in_a_triton_kernel_takes_the_usual_path(served, monkeypatch):
    monkeypatch.setenv("ACCELOPT_SERVE_TRITON", "1")
    base, fakes, jobs = served
    status, body = post(base, triton())
    assert status == 202, body
    deadline = time.monotonic() + 10
    while jobs.counts()["done"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert fakes.made_for == ["triton"] and fakes.profiler.evaluated == ["triton"]


def test_the_app_warns_on_stderr_only_with_the_opt_in(monkeypatch, capsys):
    fakes = Fakes()
    views = Views(lambda: [], lambda n: {}, lambda: [], lambda r: None)
    jobs = EvaluationJobs(fakes.load, fakes.profiler_for, capacity=1)  # type: ignore[arg-type]
    try:
        monkeypatch.delenv("ACCELOPT_SERVE_TRITON", raising=False)
        create_app(jobs, views, TOKEN)
        assert capsys.readouterr().err == ""
        monkeypatch.setenv("ACCELOPT_SERVE_TRITON", "1")
        create_app(jobs, views, TOKEN)
        assert capsys.readouterr().err == TRITON_WARNING + "\n"
    finally:
        jobs.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_accelopt_serve_with_the_opt_in_warns_and_passes_triton_on(cli_env, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**cli_env, "ACCELOPT_SERVE_TRITON": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelopt", "serve", "--port", str(port), "--token-file",
         str(token_file), "--workspace", str(tmp_path / "ws")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            try:
                status, body = post(base, {**triton(), "source": "import triton\n"})
                break
            except OSError:
                time.sleep(0.2)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    # the usual path: here (no GPU) a 400 that says so; on a GPU host the kernel is queued
    assert status in {202, 400} and body.get("detail") != TRITON_REFUSED, body
    assert err.splitlines().count(TRITON_WARNING) == 1, err
