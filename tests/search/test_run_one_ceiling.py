"""``execute_run`` ends a run on one ceiling: when a kernel beat a cached ceiling and it was raised
part-way (here by a fake runner behind the real ``CachedProfiler``, scoring as ``Evaluator``
does), the baseline scored before the raise is re-scored, in the summary the command prints and
in the store (the run's hardware, its evaluations and its iterations). The search itself is
replaced by two admitted kernels: the baseline, then one 1.73x faster that beats the ceiling."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from agents_pool import write_config
from runners import RunsOnly
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.config import load_config
from accelopt.problems import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.parent.scoring import blames_the_ceiling, build_evaluation
from accelopt.profiling.profiler import EvaluationCache, Job, Measured
from accelopt.profiling.worker.protocol import KernelResult
from accelopt.search import run as run_module
from accelopt.search.config import SearchConfig
from accelopt.search.evaluations import run_evaluations
from accelopt.search.loop import Optimizer
from accelopt.search.run import RunInputs, RunTarget, execute_run, new_run
from accelopt.search.selection import Candidate
from accelopt.search.spec import run_hardware
from accelopt.search.summary import run_summary
from accelopt.store.records import KernelOrigin, RunStatus
from accelopt.store.store import Store

LOW = make_spec(name="cpu:busy", matmul_rate=1e15, vector_rate=1e15, bandwidth=26e9)
RAISED_BANDWIDTH = 46e9
BASELINE = "void kernel(const float *x, float *out) { out[0] = x[0]; }\n"
FAST = "void kernel(const float *x, float *out) { out[1] = x[1]; }\n"  # 1.73x faster
PCT_OF_LOW = {BASELINE: 0.68, FAST: 0.68 * 1.73}


class RaisingRunner(RunsOnly):
    """Scores each job against its spec; one that beats the roofline has the bandwidth raised
    (once) and is scored again, as ``Evaluator._scored`` does."""

    threads = 2
    capacity = 1

    def __init__(self, hardware: HardwareSpec) -> None:
        self.hardware = hardware

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        for i, job in enumerate(jobs):
            kernel, problem, workload = job
            cost = problem.cost.at(problem.workload(workload).sizes)
            latency = cost.bytes / LOW.bandwidth / PCT_OF_LOW[kernel.source]
            result = KernelResult(latency_s=latency, min_s=latency, calls=20)
            evaluation = build_evaluation(job, self.hardware, 2, result)
            if blames_the_ceiling(evaluation.status, evaluation.pct_of_peak):
                self.hardware = self.hardware.model_copy(update={"bandwidth": RAISED_BANDWIDTH})
                evaluation = build_evaluation(job, self.hardware, 2, result)
            yield Measured(i, evaluation)

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


async def two_kernels(optimizer: Optimizer, resume: bool) -> tuple[RunStatus, Candidate, Candidate]:
    """What ``_drive`` would do, in short: the baseline, then a faster kernel, each committed."""
    base = await optimizer.measurer.admit(BASELINE, None, None, 0, KernelOrigin.BASELINE)
    store, run = optimizer.context.store, optimizer.context.run
    store.update_run(run.id, baseline_hash=base.hash)
    optimizer.commit(0, [base], base)
    fast = await optimizer.measurer.admit(FAST, base, None, 1, KernelOrigin.EXECUTOR)
    optimizer.commit(1, [fast], fast)
    return RunStatus.FINISHED, base, fast


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> None:
    def make_profiler(
        kind: str,
        hardware: HardwareSpec,
        config: EvalConfig | None = None,
        ray_address: str | None = None,
        store: EvaluationCache | None = None,
    ) -> CachedProfiler:
        return CachedProfiler(
            kind, hardware, config or EvalConfig(), RaisingRunner(hardware), store
        )

    monkeypatch.setattr(run_module, "make_profiler", make_profiler)
    monkeypatch.setattr(run_module, "_drive", two_kernels)


def test_a_run_ends_with_every_figure_against_the_raised_ceiling(patched, tmp_path: Path):
    llm = load_config(write_config(tmp_path / "accelopt.yaml", "http://127.0.0.1:9"))
    inputs = RunInputs(llm, LOW, EvalConfig(), check_llm=False)
    with Store.open(tmp_path / "ws") as store:
        run = new_run(store, RunTarget("silu", "cpu", "cpu", LOW), SearchConfig(iterations=1), llm)
        assert run.hardware == LOW.key()
        result = execute_run(store, run, inputs, resume=False)
        raised = LOW.model_copy(update={"bandwidth": RAISED_BANDWIDTH})
        assert result.run.hardware == raised.key()
        assert run_hardware(result.run, LOW) == raised  # a resume goes on against it
        base, best = result.baseline.evaluation, result.best.evaluation
        assert base.hardware == best.hardware == raised.key()
        assert base.cached.peak_s == best.cached.peak_s
        assert base.pct_of_peak == pytest.approx(0.68 * 26e9 / RAISED_BANDWIDTH)
        summary = run_summary(result)
        assert summary.best.pct_of_peak / summary.baseline.pct_of_peak == pytest.approx(1.73)
        stored: dict[str, Evaluation] = run_evaluations(store, run.id)
        assert {e.hardware for e in stored.values()} == {raised.key()}
        best_pcts = [i.best_pct_of_peak for i in store.iterations(run.id)]
        assert best_pcts == pytest.approx([base.pct_of_peak, best.pct_of_peak])
