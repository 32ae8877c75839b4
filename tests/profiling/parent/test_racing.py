"""Racing inside a search: a candidate clearly slower than its parent stops timing early. It is
recorded as slower, with the interval it had, and is never a final figure: the evaluation cache
keeps it apart, where only a resumed search (racing the same parent) finds it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from fakes import fake_evaluation, variant

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.parent.evaluator import Evaluator
from accelopt.profiling.profiler import Job, Measured
from accelopt.search.measuring import race_s
from accelopt.search.selection import Candidate, Comparison, compare
from accelopt.store.records import KernelOrigin, KernelRecord

SILU = load_problem("silu")
CONFIG = EvalConfig(seeds=2, warmup_calls=1, min_calls=5, min_time_s=0.05, ci_time_cap_s=0.5,
                    workers=1)  # fmt: skip


class RacingRunner:
    """Measures every job; a race against a latency above ``beats`` is lost (raced)."""

    threads, capacity = 1, 1

    def __init__(self, hardware: HardwareSpec, beats: float) -> None:
        self.hardware, self.beats, self.jobs = hardware, beats, 0

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        for i, job in enumerate(jobs):
            self.jobs += 1
            yield Measured(i, fake_evaluation(job, self.hardware, self.jobs))

    def race(self, job: Job, race_s: float) -> Evaluation:
        self.jobs += 1
        found = fake_evaluation(job, self.hardware, self.jobs)
        return found.model_copy(update={"raced": race_s < self.beats})

    def retime(self, *args: object) -> None:
        raise AssertionError("not used")

    def close(self) -> None:
        pass


def test_a_raced_evaluation_is_no_final_figure_but_a_resumed_search_finds_it(hw, store):
    runner = RacingRunner(hw, beats=1.0)
    profiler = CachedProfiler("fake", hw, CONFIG, runner, store)
    kernel = variant(1)
    raced = profiler.race(kernel, SILU, "small", race_s=0.5)
    assert raced.raced and runner.jobs == 1
    again = profiler.race(kernel, SILU, "small", race_s=0.5)  # a resumed search
    assert again.raced and runner.jobs == 1
    final = profiler.evaluate(kernel, SILU, "small")  # a report, a bench: measured in full
    assert not final.raced and runner.jobs == 2
    assert profiler.race(kernel, SILU, "small", race_s=0.5) == final  # the final one wins


def test_a_race_run_to_the_end_is_cached_as_any_evaluation(hw, store):
    runner = RacingRunner(hw, beats=0.0)
    profiler = CachedProfiler("fake", hw, CONFIG, runner, store)
    assert not profiler.race(variant(2), SILU, "small", race_s=0.5).raced
    profiler.evaluate(variant(2), SILU, "small")
    assert runner.jobs == 1


def test_a_child_races_its_parents_latency_widened_by_the_search_noise(hw):
    parent = Candidate(_record("p"), fake_evaluation((variant(3), SILU, "small"), hw, 1))
    assert parent.latency is not None
    limit = race_s(parent)
    assert limit is not None and limit > parent.latency
    slower = parent.evaluation.model_copy(update={"latency_s": limit * 1.01, "raced": True})
    assert compare(slower, parent.evaluation) is Comparison.NOT_FASTER  # what the race decided
    assert race_s(None) is None


@pytest.mark.usefixtures("accelopt_cache")
def test_a_kernel_clearly_slower_stops_timing_early_and_says_so(hw):
    kernel = Kernel(shipped_kernel(SILU, "baseline").read_text(), "cpu", "baseline")
    # the small workload: calls of microseconds, so the 16 samples a race needs come at once
    long_enough = CONFIG.model_copy(update={"min_calls": 24, "min_time_s": 0.3})
    with Evaluator(hw, long_enough) as evaluator:
        full = evaluator.evaluate(kernel, SILU, "small")
        raced = evaluator.evaluate(kernel, SILU, "small", race_s=1e-9)
    assert full.status is Status.PASSED and not full.raced, full.error
    assert raced.status is Status.PASSED and raced.raced, raced.error
    assert raced.ci_low_s is not None and raced.ci_low_s > 1e-9  # the interval it had


def _record(name: str) -> KernelRecord:
    kernel = variant(3)
    return KernelRecord(hash=kernel.hash, source=kernel.source, backend="cpu", iteration=0,
                        origin=KernelOrigin.BASELINE, parent_hash="", plan_title="")  # fmt: skip
