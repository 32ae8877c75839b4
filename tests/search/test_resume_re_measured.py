"""A run resumed after this machine's ceilings were re-measured higher moves to the new ones
(issue 46, defect 5). The user's case: a run started against a bandwidth measured on a busy
machine (12 GB/s), stopped, the ceiling re-measured at 50 GB/s; the resume was pinned to the old
figure, so the shipped silu expert (90 % of the real bandwidth) read 375 % of peak, SUSPICIOUS,
and the command exited 2. Evaluations are scored here by a fake runner as the ``Evaluator``
scores them (``build_evaluation``), against the spec the run's profiler was made with."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from agents_pool import write_config
from runners import RunsOnly
from specs import make_spec

from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.config import load_config
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.parent.scoring import build_evaluation
from accelopt.profiling.profiler import EvaluationCache, Job, Measured
from accelopt.profiling.worker.protocol import KernelResult
from accelopt.search import run as run_module
from accelopt.search.config import SearchConfig
from accelopt.search.evaluations import run_evaluations
from accelopt.search.loop import Optimizer
from accelopt.search.one_ceiling import re_measured_higher
from accelopt.search.run import RunInputs, RunTarget, execute_run, hardware_note, new_run
from accelopt.search.selection import Candidate
from accelopt.store.records import KernelOrigin, RunStatus
from accelopt.store.store import Store

BUSY = make_spec(name="cpu:vm", matmul_rate=1e15, vector_rate=1e15, bandwidth=12e9)
QUIET = BUSY.model_copy(update={"bandwidth": 50e9})
LOWER = BUSY.model_copy(update={"bandwidth": 10e9})
BASELINE = "void kernel(const float *x, float *out) { out[0] = x[0]; }\n"
EXPERT = "void kernel(const float *x, float *out) { out[1] = x[1]; }\n"
OF_REAL = {BASELINE: 0.2, EXPERT: 0.9}  # fraction of the real (quiet) bandwidth each reaches


class ScoringRunner(RunsOnly):
    threads, capacity = 2, 1

    def __init__(self, hardware: HardwareSpec) -> None:
        self.hardware = hardware

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        for i, job in enumerate(jobs):
            kernel, problem, workload = job
            cost = problem.cost.at(problem.workload(workload).sizes)
            latency = cost.bytes / QUIET.bandwidth / OF_REAL[kernel.source]
            result = KernelResult(latency_s=latency, min_s=latency, calls=20)
            yield Measured(i, build_evaluation(job, self.hardware, 2, result))

    def close(self) -> None:
        pass


async def one_kernel_a_session(optimizer: Optimizer, resume: bool):
    """The first session: the baseline; the resumed one: the expert."""
    if not resume:
        base = await optimizer.measurer.admit(BASELINE, None, None, 0, KernelOrigin.BASELINE)
        store, run = optimizer.context.store, optimizer.context.run
        store.update_run(run.id, baseline_hash=base.hash)
        optimizer.commit(0, [base], base)
        return RunStatus.INTERRUPTED, base, base
    store, run = optimizer.context.store, optimizer.context.run
    base = next(k for k in store.kernels(run.id) if k.source == BASELINE)
    evaluation = run_evaluations(store, run)[base.hash]
    start = Candidate(base, evaluation)
    expert = await optimizer.measurer.admit(EXPERT, start, None, 1, KernelOrigin.EXECUTOR)
    optimizer.commit(1, [expert], expert)
    return RunStatus.FINISHED, start, expert


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> None:
    def make_profiler(kind: str, hardware: HardwareSpec, config: EvalConfig | None = None,
                      ray_address: str | None = None,
                      store: EvaluationCache | None = None) -> CachedProfiler:  # fmt: skip
        return CachedProfiler(
            kind, hardware, config or EvalConfig(), ScoringRunner(hardware), store
        )

    monkeypatch.setattr(run_module, "make_profiler", make_profiler)
    monkeypatch.setattr(run_module, "_drive", one_kernel_a_session)


def _started(tmp_path: Path, store: Store):
    llm = load_config(write_config(tmp_path / "accelopt.yaml", "http://127.0.0.1:9"))
    run = new_run(store, RunTarget("silu", "cpu", "cpu", BUSY), SearchConfig(iterations=2), llm)
    execute_run(store, run, RunInputs(llm, BUSY, EvalConfig(), check_llm=False), resume=False)
    return llm, store.get_run(run.id)


def test_a_resume_moves_to_ceilings_re_measured_higher(patched, tmp_path: Path) -> None:
    with Store.open(tmp_path / "ws") as store:
        llm, run = _started(tmp_path, store)
        assert "moves to the new ones" in hardware_note(run, QUIET)
        inputs = RunInputs(llm, QUIET, EvalConfig(), check_llm=False)
        result = execute_run(store, run, inputs, resume=True)
        assert result.run.hardware == QUIET.key()
        best, start = result.best.evaluation, result.baseline.evaluation
        assert best.status is Status.PASSED, best.error  # not a cheat at 375 % of 12 GB/s
        assert best.pct_of_peak == pytest.approx(0.9)
        assert start.pct_of_peak == pytest.approx(0.2)  # the first session's, re-scored
        stored = run_evaluations(store, run.id)
        assert {e.hardware for e in stored.values()} == {QUIET.key()}


def test_a_resume_stays_on_its_ceilings_when_the_new_ones_are_lower(patched, tmp_path) -> None:
    with Store.open(tmp_path / "ws") as store:
        _, run = _started(tmp_path, store)
        assert not re_measured_higher(BUSY, LOWER)
        assert "goes on against the ceilings it started with" in hardware_note(run, LOWER)
        other = LOWER.model_copy(update={"bandwidth": 60e9, "l2_bytes": 123})
        assert not re_measured_higher(BUSY, other)  # another machine's caches: not a re-measure
