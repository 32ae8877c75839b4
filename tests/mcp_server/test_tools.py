"""The tools of `accelopt mcp` without MCP: a `McpTools` over a real store with a fake profiler
(no kernel runs), so the run bookkeeping is fast and deterministic. Each evaluation is a step
of the session's run of (problem, workload, backend): kernel n at iteration n, the first as the
baseline, the previous kernel as parent, iteration n committed with the fastest PASSED kernel
so far as best; a failed kernel never becomes best."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.hardware.spec import HardwareSpec
from accelopt.mcp_server.tools import (
    MAX_SOURCE_BYTES,
    STRATEGY,
    TRITON_REFUSED,
    McpTools,
    json_safe,
)
from accelopt.memory.records import Experience, Lesson
from accelopt.problems.loader import UnknownProblemError
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.evaluations import run_evaluations
from accelopt.store.store import Store
from accelopt.views import hardware_for as real_hardware_for
from accelopt.views import run_show_json

FIXED = make_spec(name="cpu:fake")
PEAK_S = 1e-6


def kernel_source(label: str) -> str:
    return f"void kernel(const float *x, float *y) {{ float {label} = x[0]; y[0] = {label}; }}\n"


class FakeProfiler:
    """A Profiler that runs nothing: each source's outcome is given by the test (a status and a
    latency); what it answers is cached in the store, as the real one does."""

    kind = "fake"
    threads = 1
    capacity = 1

    def __init__(self, hardware: HardwareSpec, store: Store) -> None:
        self.hardware, self.store = hardware, store
        self.outcomes: dict[str, tuple[Status, float | None]] = {}
        self.closed = False
        self.calls = 0

    def evaluate(
        self, kernel: Kernel, problem: Problem, workload: str, *, fresh: bool = False
    ) -> Evaluation:
        self.calls += 1
        status, latency = self.outcomes[kernel.source]
        evaluation = Evaluation(
            problem=problem.name,
            workload=workload,
            backend=kernel.backend,
            problem_version=problem.fingerprint,
            kernel=kernel.name,
            kernel_hash=kernel.hash,
            hardware=self.hardware.key(),
            status=status,
            error="" if status is Status.PASSED else f"{status.value.lower()} on purpose",
            latency_s=latency,
            peak_s=PEAK_S,
            pct_of_peak=PEAK_S / latency if latency else None,
            bound="memory",
            max_rel_err=math.inf if status is Status.INCORRECT else 0.0,
            tolerance=1e-5,
        )
        self.store.put_evaluation(evaluation)
        return evaluation

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path) as opened:
        yield opened


@pytest.fixture
def session(tmp_path: Path, store: Store) -> Iterator[tuple[McpTools, dict[str, FakeProfiler]]]:
    made: dict[str, FakeProfiler] = {}

    def factory(hardware: HardwareSpec, st: Store) -> FakeProfiler:
        made[hardware.backend] = FakeProfiler(hardware, st)
        return made[hardware.backend]

    def hardware_for(backend: str) -> HardwareSpec:
        return FIXED if backend == "cpu" else real_hardware_for(backend)

    s = McpTools(tmp_path, store, hardware_for=hardware_for, profiler_factory=factory,
                remarks=False)  # fmt: skip
    yield s, made
    s.close()


def evaluate(
    session: McpTools, made: dict[str, FakeProfiler], label: str, status: Status,
    latency: float | None, workload: str = "small",
) -> dict:  # fmt: skip
    source = kernel_source(label)
    session.profiler("cpu")
    made["cpu"].outcomes[source] = (status, latency)
    return session.evaluate_kernel("silu", source, workload=workload)


def test_each_evaluation_is_an_iteration_and_the_faster_passed_kernel_is_best(session, store):
    s, made = session
    first = evaluate(s, made, "first", Status.PASSED, 4e-6)
    second = evaluate(s, made, "second", Status.PASSED, 2e-6)
    third = evaluate(s, made, "third", Status.PASSED, 3e-6)

    [run] = store.list_runs()
    assert (run.problem, run.workload, run.backend, run.strategy, run.status) == (
        "silu", "small", "cpu", STRATEGY, "running",
    )  # fmt: skip
    assert run.hardware == FIXED.key()
    assert run.spec["hardware_spec"] == FIXED.model_dump(mode="json")
    assert first["run"]["id"] == second["run"]["id"] == third["run"]["id"] == run.id
    assert [first["run"]["iteration"], second["run"]["iteration"]] == [1, 2]
    assert [first["run"]["new_best"], second["run"]["new_best"], third["run"]["new_best"]] == [
        True, True, False,
    ]  # fmt: skip
    assert second["run"]["speedup_over_first"] == pytest.approx(2.0)

    hashes = [Kernel(kernel_source(x)).hash for x in ("first", "second", "third")]
    assert run.baseline_hash == hashes[0]
    assert run.best_hash == hashes[1]
    kernels = store.kernels(run.id)
    assert [(k.hash, k.iteration, k.origin, k.parent_hash) for k in kernels] == [
        (hashes[0], 1, "baseline", ""),
        (hashes[1], 2, STRATEGY, hashes[0]),
        (hashes[2], 3, STRATEGY, hashes[1]),
    ]
    iterations = store.iterations(run.id)
    assert [i.iteration for i in iterations] == [1, 2, 3]
    assert [i.best_hash for i in iterations] == [hashes[0], hashes[1], hashes[1]]
    assert [i.best_latency_s for i in iterations] == [4e-6, 2e-6, 2e-6]
    assert iterations[1].best_pct_of_peak == pytest.approx(PEAK_S / 2e-6)
    assert [i.evaluated for i in iterations] == [1, 2, 3]
    assert all(i.spent_usd == 0 for i in iterations)
    assert iterations[2].beam == (hashes[1],)
    assert set(run_evaluations(store, run.id)) == set(hashes)

    shown = run_show_json(store, run)  # what `accelopt runs show RUN --json -` prints
    assert [step["hash"] for step in shown["lineage"]] == hashes[:2]
    assert shown["speedup"] == pytest.approx(2.0)


def test_a_failed_kernel_never_becomes_best(session, store):
    s, made = session
    broken = evaluate(s, made, "broken", Status.COMPILE_ERROR, None)
    assert broken["status"] == "COMPILE_ERROR"
    assert broken["run"]["best_hash"] == "" and broken["run"]["new_best"] is False
    [run] = store.list_runs()
    assert run.best_hash == "" and run.baseline_hash == Kernel(kernel_source("broken")).hash
    [first] = store.iterations(run.id)
    assert (first.best_hash, first.best_latency_s, first.beam) == ("", None, ())
    assert first.failed_by_status == {"COMPILE_ERROR": 1}

    evaluate(s, made, "slow", Status.PASSED, 5e-6)
    cheat = evaluate(s, made, "cheat", Status.SUSPICIOUS, 1e-9)  # timed, but not PASSED
    wrong = evaluate(s, made, "wrong", Status.INCORRECT, 1e-7)
    assert cheat["run"]["new_best"] is False and wrong["run"]["new_best"] is False
    assert wrong["max_rel_err"] == "inf"  # JSON has no infinity
    slow_hash = Kernel(kernel_source("slow")).hash
    assert store.get_run(run.id).best_hash == slow_hash
    last = store.iterations(run.id)[-1]
    assert (last.iteration, last.best_hash, last.best_latency_s) == (4, slow_hash, 5e-6)
    assert last.failed_by_status == {"COMPILE_ERROR": 1, "INCORRECT": 1, "SUSPICIOUS": 1}


def test_one_run_per_problem_workload_and_backend(session, store):
    s, made = session
    a = evaluate(s, made, "a", Status.PASSED, 2e-6, workload="small")
    b = evaluate(s, made, "b", Status.PASSED, 2e-6, workload="tiny")
    c = evaluate(s, made, "c", Status.PASSED, 1e-6, workload="small")
    assert a["run"]["id"] == c["run"]["id"] != b["run"]["id"]
    assert (b["run"]["iteration"], c["run"]["iteration"]) == (1, 2)
    assert {r.workload for r in store.list_runs()} == {"small", "tiny"}
    assert s.runs()[0].id == a["run"]["id"]


def test_the_same_kernel_again_is_an_iteration_but_not_a_new_kernel(session, store):
    s, made = session
    evaluate(s, made, "a", Status.PASSED, 2e-6)
    evaluate(s, made, "b", Status.PASSED, 3e-6)
    again = evaluate(s, made, "a", Status.PASSED, 2e-6)
    evaluate(s, made, "c", Status.PASSED, 1e-6)
    assert again["run"]["iteration"] == 3
    run = store.list_runs()[0]
    kernels = store.kernels(run.id)
    a, b, c = (Kernel(kernel_source(x)).hash for x in "abc")
    assert [(k.hash, k.parent_hash) for k in kernels] == [(a, ""), (b, a), (c, a)]
    assert [i.iteration for i in store.iterations(run.id)] == [1, 2, 3, 4]


def test_close_finishes_the_runs_and_stops_the_profilers(session, store):
    s, made = session
    evaluate(s, made, "a", Status.PASSED, 2e-6)
    s.close()
    assert made["cpu"].closed
    assert [r.status for r in store.list_runs()] == ["finished"]
    s.close("interrupted")  # a second close changes nothing
    assert [r.status for r in store.list_runs()] == ["finished"]
    with pytest.raises(UserError, match="shutting down"):
        s.evaluate_kernel("silu", kernel_source("late"), workload="small")


def test_user_mistakes_are_user_errors_and_record_nothing(session, store):
    s, made = session
    with pytest.raises(UserError, match="empty"):
        s.evaluate_kernel("silu", " \n\t", workload="small")
    with pytest.raises(UserError, match="over the limit"):
        s.evaluate_kernel("silu", "x" * (MAX_SOURCE_BYTES + 1), workload="small")
    with pytest.raises(UserError, match="not valid Unicode"):
        s.evaluate_kernel("silu", "void kernel() {} \ud800", workload="small")
    with pytest.raises(UnknownProblemError, match="unknown problem 'nope'"):
        s.evaluate_kernel("nope", kernel_source("a"))
    with pytest.raises(UserError, match="no workload 'huge'"):
        s.evaluate_kernel("silu", kernel_source("a"), workload="huge")
    with pytest.raises(UserError, match="unknown backend 'gpu'"):
        s.evaluate_kernel("silu", kernel_source("a"), workload="small", backend="gpu")
    with pytest.raises(UserError, match="unknown backend 'gpu'"):
        s.show_problem("silu", backend="gpu")
    with pytest.raises(UnknownProblemError):
        s.show_problem("nope")
    with pytest.raises(UserError, match="unknown backend"):
        s.search_memory("tiling", backend="gpu")
    with pytest.raises(UserError, match="at least 1"):
        s.search_memory("tiling", k=0)
    assert store.list_runs() == [] and made == {}


TRITON = "import os\nos.system('touch /tmp/pwned')\n"  # Python: what a hostile client might send


@pytest.fixture
def triton_session(tmp_path: Path, store: Store) -> Iterator[tuple[McpTools, list[str], dict]]:
    """A session whose every backend has fake ceilings and a fake profiler: what it was asked
    for (the backends whose ceilings were looked up) and what it made."""
    asked: list[str] = []
    made: dict[str, FakeProfiler] = {}

    def hardware_for(backend: str) -> HardwareSpec:
        asked.append(backend)
        return make_spec(name=f"{backend}:fake", backend=backend)

    def factory(hardware: HardwareSpec, st: Store) -> FakeProfiler:
        made[hardware.backend] = FakeProfiler(hardware, st)
        return made[hardware.backend]

    s = McpTools(tmp_path, store, hardware_for=hardware_for, profiler_factory=factory,
                remarks=False)  # fmt: skip
    yield s, asked, made
    s.close()


def test_a_triton_kernel_is_refused_before_anything_is_made(triton_session, store, monkeypatch):
    monkeypatch.delenv("ACCELOPT_SERVE_TRITON", raising=False)
    s, asked, made = triton_session
    for problem, backend in (("silu", "triton"), ("nope", "triton"), ("silu", "Triton ")):
        with pytest.raises(UserError) as refused:
            s.evaluate_kernel(problem, TRITON, workload="small", backend=backend)
        assert str(refused.value) == TRITON_REFUSED
    assert asked == [] and made == {} and store.list_runs() == []


def test_with_the_opt_in_a_triton_kernel_is_evaluated(triton_session, store, monkeypatch):
    monkeypatch.setenv("ACCELOPT_SERVE_TRITON", "1")
    s, asked, made = triton_session
    s.profiler("triton")
    made["triton"].outcomes[TRITON] = (Status.PASSED, 2e-6)
    result = s.evaluate_kernel("silu", TRITON, workload="small", backend="triton")
    assert result["status"] == "PASSED" and made["triton"].calls == 1
    assert asked == ["triton"] and [r.backend for r in store.list_runs()] == ["triton"]


def test_problems_and_show_problem(session):
    s, _ = session
    problems = s.list_problems()
    assert "silu" in [p["name"] for p in problems]
    shown = s.show_problem("silu")
    assert shown["name"] == "silu" and shown["hardware"] == FIXED.name
    assert "void kernel" in shown["baseline_source"]
    assert {c["workload"] for c in shown["costs"]} >= {"small", "tiny"}
    assert shown["machine"] == FIXED.model_dump(mode="json")
    assert "Kernel contract" in shown["backend_facts"]


def test_search_memory_returns_the_lessons_with_their_relevance(session, store):
    s, _ = session
    assert s.search_memory("vectorize the loop") == []
    lesson = Lesson("Vectorize the inner loop", "Use a polynomial expf so GCC vectorizes it.")
    store.add_experience(
        Experience(lesson=lesson, kind="positive", speedup=2.5, problem="silu", backend="cpu",
                   hardware=FIXED.key(), model="m", run_id="", slow_hash="s", fast_hash="f")
    )  # fmt: skip
    [found] = s.search_memory("vectorize expf", k=3)
    assert found["lesson"]["title"] == "Vectorize the inner loop"
    assert found["speedup"] == 2.5 and found["relevance"] > 0
    assert s.search_memory("vectorize", backend="triton") == []


def test_json_safe_writes_non_finite_numbers_as_strings():
    assert json_safe({"a": [math.inf, -math.inf, 1.5], "b": (math.nan,)}) == {
        "a": ["inf", "-inf", 1.5],
        "b": ["nan"],
    }


def test_tool_errors_carry_the_user_sentence():
    pytest.importorskip("mcp")
    from mcp.server.mcpserver.exceptions import ToolError

    from accelopt.mcp_server.server import answer

    def unknown() -> None:
        raise UnknownProblemError("unknown problem 'nope'; known problems: silu")

    with pytest.raises(ToolError, match=r"^unknown problem 'nope'"):
        answer(unknown)
    listed = answer(lambda: [{"name": "silu"}])
    assert listed.structured_content == {"result": [{"name": "silu"}]}
    assert '"silu"' in listed.content[0].text
