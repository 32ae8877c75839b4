"""Fixtures shared across the test packages: a private cache, fixed ceilings, the real command
line run in a subprocess with both, a fresh store and factories of the records it keeps."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# support/specs.py (make_spec, the one factory of test ceilings), importable as `specs` everywhere
sys.path.insert(0, str(Path(__file__).parent / "support"))

from alone import machine_share
from busy import busy_machine
from specs import make_spec

from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.records import LLMCall
from accelopt.memory.records import Experience, Lesson
from accelopt.profiling.evaluation import Evaluation
from accelopt.store.records import KernelRecord, RunRecord
from accelopt.store.store import Store
from accelopt.testing.scripted import ScriptedServer
from accelopt.testing.scripting import ReplySource

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist's workers start with COLUMNS=80 and LINES=24 in their environment, which the
    # CLI takes for the user's terminal: its tables would be cut to 80 columns, unlike in one
    # process, where piped output gets accelopt's own width.
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Under pytest-xdist, a test marked ``alone`` runs while no other worker runs a test (see
    tests/support/alone.py); the lock covers its setup and teardown too, module fixtures
    included. In one process it changes nothing."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return (yield)
    shared = Path(item.config.option.basetemp).parent  # the run's tmp tree, above popen-gwN
    with machine_share(
        shared / "machine-share", alone=item.get_closest_marker("alone") is not None
    ):
        return (yield)


@pytest.fixture(scope="session")
def accelopt_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """ACCELOPT_CACHE_DIR in os.environ, so that worker processes started later inherit it."""
    path = tmp_path_factory.mktemp("accelopt-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACCELOPT_CACHE_DIR", str(path))
        yield path


@pytest.fixture
def busy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Two CPU spinners on every CPU and a memory-bandwidth hog while the test runs (each gone
    after 300 s whatever happens): the tests of the search's decisions run beside them, as on a
    user's busy machine, not alone. One such load at a time (a lock shared by the xdist workers:
    two at once would be twice the load the tests are meant to meet); other tests run beside it."""
    shared = tmp_path_factory.getbasetemp().parent  # the run's tmp tree, above popen-gwN
    with open(shared / "busy-machine.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with busy_machine(spinners_per_cpu=2, memory=True, limit_s=300) as load:
            yield load


@pytest.fixture(scope="session")
def hw() -> HardwareSpec:
    """Fixed ceilings near this machine's, so that no test depends on a measurement."""
    return make_spec()


# This machine's ceilings for the command-line tests (tests/cli asserts the name and bandwidth).
FIXED_SPEC = make_spec(
    name="cpu:test",
    vector_rate=520e9,
    bandwidth=45e9,
    arch="x86_64",
    isa=("sse4_2", "avx", "avx2", "fma"),
    vector_bits=256,
    l1d_bytes=32 << 10,
    l2_bytes=512 << 10,
    provenance={"matmul_rate": "fixed for tests"},
)

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    cache = tmp_path_factory.mktemp("cache")
    env = {**os.environ, "ACCELOPT_CACHE_DIR": str(cache), "COLUMNS": "200"}
    # Seed this machine's ceilings so no test depends on a measurement.
    script = (
        "from accelopt.hardware.cache import save_cpu_spec; import sys, json;"
        "from accelopt.hardware.spec import HardwareSpec;"
        "save_cpu_spec(HardwareSpec.model_validate_json(sys.stdin.read()))"
    )
    subprocess.run(
        [sys.executable, "-c", script], input=FIXED_SPEC.model_dump_json(), env=env, check=True,
        text=True,
    )  # fmt: skip
    return env


@pytest.fixture(scope="module")
def run_cli(cli_env: dict[str, str]) -> Run:
    def run(
        *args: str | Path, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "accelopt", *map(str, args)],
            capture_output=True,
            text=True,
            env={**cli_env, **(env or {})},
            timeout=300,
        )

    return run


# --- a scripted LLM server ----------------------------------------------------------------------


@pytest.fixture
def script() -> ReplySource | None:
    """What the scripted LLM server answers by default: nothing scripted here; a package's
    conftest gives its team (tests/search: the agents' pool)."""
    return None


@pytest.fixture
def server(script: ReplySource | None) -> Iterator[ScriptedServer]:
    """An OpenAI-compatible server on 127.0.0.1 answering ``script`` (``accelopt.testing``)."""
    with ScriptedServer(default=script) as running:
        yield running


# --- a fresh store and the records it keeps ------------------------------------------------------


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
        "spec": {"search": {"beam": 2, "plans": 3}, "models": {"planner": "m1"}},
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
    # as real evaluations are (the record's validator holds them to it): a failure says why, and
    # a % of peak rests on a latency
    if Status(fields["status"]) is not Status.PASSED and not fields.get("error"):
        fields["error"] = f"{Status(fields['status']).value.lower()} (a test double)"
    if fields["latency_s"] is None and "pct_of_peak" not in kw:
        fields["pct_of_peak"] = None
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
