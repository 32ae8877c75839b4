"""Re-timing sessions: several kernels checked as evaluations are, then timed interleaved in one
worker under one device lock, each compared with the first (``profiling.session``).

The real pool runs two sessions (module fixtures): a passing one and one where kernels fail at
different steps. The record's arithmetic and the ray dispatcher's lost-session answer are tested
without a worker. No assertion on absolute times: only on ratios of kernels timed side by side.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from matmul_variants import GOOD, repeated
from runners import RunsOnly
from specs import make_spec

from accelopt.backends.device import HostDevice
from accelopt.backends.kernel import Kernel
from accelopt.backends.numpy.backend import reference_kernel
from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.problems import load_problem
from accelopt.profiling.cluster.dispatcher import RetimeJob, failure_of
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.factory import make_profiler
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.session import Retiming, retiming
from accelopt.profiling.stats import ratio_estimate, round_order, round_ratios
from accelopt.profiling.worker.protocol import RetimeRequest

MATMUL = load_problem("matmul")
VARIANTS = Path(__file__).parents[1] / "search" / "variants"
# One OpenMP thread: the medians then hold when other processes load the machine. A second of
# timing per kernel at most: about 50 rounds narrow a ratio's interval to +- 0.1 or so.
CONFIG = EvalConfig(
    seeds=2, min_calls=5, min_time_s=0.02, call_timeout_floor_s=5.0, threads=1, ci_time_cap_s=1.0
)
# The same code under another hash: the preprocessor drops the line.
SAME = "#define UNUSED_TAG 1\n" + GOOD
# Eight times the work: side by side at least 3.3 times slower (see matmul_variants).
SLOWER = repeated(8)
CRASH_ON_CALL_40 = """
#include <stddef.h>
#include <string.h>

static int calls;

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
    if (++calls == 40) { volatile float *nowhere = NULL; *nowhere = lhs[0]; }
    for (int i = 0; i < M; i++) {
        float *o = out + (size_t)i * N;
        memset(o, 0, sizeof(float) * N);
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++)
                o[j] += lhs[(size_t)i * K + k] * rhs[(size_t)k * N + j];
    }
}
"""


def kernel(source: str, name: str) -> Kernel:
    return Kernel(source, "cpu", name)


class RecordingCache:
    """An ``EvaluationCache`` that remembers every use."""

    def __init__(self) -> None:
        self.uses: list[str] = []

    def get_evaluation(
        self, kernel_hash: str, problem: str, workload: str, hardware: str, *,
        problem_version: str = "",
    ) -> Evaluation | None:  # fmt: skip
        self.uses.append(f"get {kernel_hash}")
        return None

    def put_evaluation(self, evaluation: Evaluation) -> None:
        self.uses.append(f"put {evaluation.kernel_hash}")


@pytest.fixture(scope="module")
def local(accelopt_cache, hw) -> Iterator[tuple[CachedProfiler, RecordingCache, list[Any]]]:
    """The local profiler with a recording cache; its pool's requests are recorded too."""
    cache = RecordingCache()
    requests: list[Any] = []
    with make_profiler("local", hw, CONFIG, store=cache) as profiler:
        pool = profiler.runner.evaluator.pool  # type: ignore[attr-defined]
        ask = pool.ask

        def recorded(request: Any, *args: Any) -> Any:
            requests.append(request)
            return ask(request, *args)

        pool.ask = recorded
        yield profiler, cache, requests


@pytest.fixture(scope="module")
def passing(local) -> tuple[Retiming, list[Any], set[int]]:
    profiler, cache, requests = local
    first = len(requests)
    kernels = [kernel(GOOD, "parent"), kernel(SAME, "same"), kernel(SLOWER, "eight_passes")]
    result = profiler.retime(kernels, MATMUL, "small")
    pool = profiler.runner.evaluator.pool  # type: ignore[attr-defined]
    workers = {w.proc.pid for w in pool._idle}
    assert cache.uses == []  # neither read nor written
    return result, requests[first:], workers


@pytest.fixture(scope="module")
def failing(local) -> Retiming:
    profiler, cache, _ = local
    kernels = [
        kernel(GOOD, "parent"),
        kernel((VARIANTS / "matmul_wrong.c").read_text(), "wrong"),
        kernel(CRASH_ON_CALL_40, "crashes_when_timed"),
        kernel('#include <stdio.h>\nvoid kernel(float *a) { puts("hi"); }', "rejected"),
        kernel(SAME, "same"),
    ]
    result = profiler.retime(kernels, MATMUL, "small")
    assert cache.uses == []
    return result


SPINNING = (Path(__file__).parent / "kernels" / "leaves_a_thread_spinning.c").read_text()


@pytest.mark.timeout(180)
@pytest.mark.alone  # a figure: the copy's ratio within 10 % (the attack moved it 55-165x)
def test_a_kernel_that_leaves_a_thread_spinning_cannot_move_a_session(accelopt_cache, hw):
    """The held-out attack: a kernel whose process keeps a thread burning between its calls (an
    OpenMP team it starts and never ends) made an identical reference read 55-165x slower in a
    session beside it. Its process is stopped while the others are timed, and REJECTED once it
    is seen running after a call; an identical copy of the reference reads within 10 % (3 % was
    met alone but failed a full run here at 3.06 %: the VM's own drift; the attack is 55x). (The
    harness before this passed the kernel: eval PASSED, control note only.) Two threads: the
    team reuses the pool thread made before the sandbox (one thread: it cannot make one)."""
    kernels = [kernel(GOOD, "reference"), kernel(SPINNING, "spins"), kernel(SAME, "copy")]
    with make_profiler("local", hw, CONFIG.model_copy(update={"threads": 2})) as profiler:
        result = profiler.retime(kernels, MATMUL, "small")
    reference, spins, copy = result.evaluations
    assert spins.status is Status.REJECTED, (spins.status, spins.error)
    assert spins.error.startswith("the kernel's process kept running between its calls")
    assert reference.passed and copy.passed
    assert result.ratios[2] is not None and abs(result.ratios[2] - 1.0) <= 0.10, result.ratios


@pytest.mark.timeout(120)
def test_kernels_are_compared_with_the_first(passing):
    result, _, _ = passing
    assert [e.status for e in result.evaluations] == [Status.PASSED] * 3
    assert [e.kernel for e in result.evaluations] == ["parent", "same", "eight_passes"]
    assert all(
        e.latency_s and e.ci_low_s and e.calls >= CONFIG.min_calls for e in result.evaluations
    )
    assert result.rounds >= 8
    where = {e.placement for e in result.evaluations}  # the same CPUs for all (placement.py)
    assert len(where) == 1 and where.pop().startswith("CPU "), result
    same, slower = result.ratios[1], result.ratios[2]
    assert result.ratios[0] == 1.0 and same is not None and slower is not None
    assert 0.8 < same < 1.25, result
    assert slower > 2.0, result
    assert all(ci is not None and ci >= 0 for ci in result.ratio_ci), result


@pytest.mark.timeout(120)
def test_one_worker_timed_them_all(passing):
    result, requests, workers = passing
    assert len(requests) == 1  # one request to the pool: one worker process took them all
    assert isinstance(requests[0], RetimeRequest) and len(requests[0].kernels) == 3
    assert result.worker_pid in workers
    # each kernel in its own kernel host process, closed with the session
    assert all(e.isolation is not None for e in result.evaluations)


@pytest.mark.timeout(120)
def test_each_kernel_gets_its_own_verdict(failing):
    statuses = [e.status for e in failing.evaluations]
    assert statuses == [
        Status.PASSED, Status.INCORRECT, Status.CRASH, Status.REJECTED, Status.PASSED
    ], [e.error for e in failing.evaluations]  # fmt: skip
    crashed = failing.evaluations[2]
    assert "SIGSEGV" in crashed.error or "signal" in crashed.error, crashed.error
    assert failing.ratios[:4] == (1.0, None, None, None)
    assert failing.ratio_ci[1:4] == (None, None, None)
    same = failing.ratios[4]
    assert same is not None and 0.8 < same < 1.25, failing
    assert failing.evaluations[4].latency_s is not None


@pytest.mark.timeout(120)
def test_kernels_that_run_in_the_worker_itself_are_retimed_too(local):
    """The numpy kind runs in the worker's own process (no kernel host): one memory cap for all."""
    profiler, cache, _ = local
    reference = reference_kernel(MATMUL)
    tagged = Kernel(reference.source + "\nTAG = 1\n", "numpy", "tagged")
    result = profiler.retime([reference, tagged], MATMUL, "small")
    assert [e.status for e in result.evaluations] == [Status.PASSED] * 2, result
    assert result.ratios[1] is not None and 0.5 < result.ratios[1] < 2.0, result
    assert cache.uses == []


def test_retime_refuses_check_only(hw):
    runner = _NoRunner()
    profiler = CachedProfiler("fake", hw, CONFIG.model_copy(update={"check_only": True}), runner)
    with pytest.raises(UserError, match="check_only"):
        profiler.retime([kernel(GOOD, "a")], MATMUL, "small")
    assert runner.calls == 0


class _NoRunner(RunsOnly):
    threads = 1
    capacity = 1

    def __init__(self) -> None:
        self.calls = 0
        self.hardware = make_spec()

    def run(self, jobs: Any) -> Iterator[Any]:
        self.calls += 1
        return iter(())

    def retime(self, *args: Any) -> Retiming:
        self.calls += 1
        raise AssertionError("not to be called")

    def close(self) -> None:
        pass


# -- the record's arithmetic (no worker) --------------------------------------------------------


def evaluation(name: str, status: Status = Status.PASSED) -> Evaluation:
    return Evaluation(
        problem="matmul", workload="small", backend="cpu", kernel=name, kernel_hash=name,
        hardware="hw", status=status, error="" if status is Status.PASSED else "failed",
        peak_s=1e-6, bound="matmul", tolerance=1e-4,
    )  # fmt: skip


def test_rounds_alternate_their_order():
    assert [round_order(r, 3) for r in range(3)] == [[0, 1, 2], [2, 1, 0], [0, 1, 2]]


def test_ratios_are_taken_round_by_round():
    reference = [1.0, 2.0, None, 1.0]
    other = [2.0, 4.0, 3.0, None]
    assert round_ratios(reference, other) == [2.0, 2.0]
    assert ratio_estimate([]) == (None, None)
    assert ratio_estimate([2.0, 2.0]) == (2.0, None)  # too few rounds for an interval
    ratio, ci = ratio_estimate([1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0, 1.0])
    assert ratio == 1.0 and ci is not None and 0 < ci < 0.2


def test_a_kernel_that_failed_has_no_ratio():
    rounds = [[1.0] * 8, [2.0] * 8, [3.0] * 8]
    evals = [evaluation("a"), evaluation("b"), evaluation("c", Status.INCORRECT)]
    record = retiming(evals, rounds, 8, 123)
    assert record.ratios == (1.0, 2.0, None)
    assert record.ratio_ci == (0.0, 0.0, None)
    assert (record.rounds, record.worker_pid) == (8, 123)
    lost_reference = retiming([evaluation("a", Status.CRASH), evaluation("b")], rounds[:2], 8)
    assert lost_reference.ratios == (None, None)


def test_a_session_the_service_lost_is_a_crash_for_every_kernel(hw):
    job = RetimeJob((kernel(GOOD, "a"), kernel(SAME, "b")), MATMUL, "small")
    answer = failure_of(job, "the job was lost 3 times", hw, 2)
    assert isinstance(answer, Retiming)
    assert [e.status for e in answer.evaluations] == [Status.CRASH, Status.CRASH]
    assert all("lost 3 times" in e.error for e in answer.evaluations)
    assert answer.ratios == (None, None) and answer.rounds == 0


def test_a_session_verdict_is_decided_once_more_rounds_cannot_change_it():
    from accelopt.profiling.stats import decided, faster

    assert decided(1.002, 0.015) and not faster(1.002, 0.015)  # a look-alike, known to 1.5 %
    assert not decided(1.002, 0.05)  # known to 5 %: a gain of 4 % is still in its interval
    assert not decided(1.38, 0.476)  # a look-alike's eight noisy rounds (CI, stop 34)
    assert decided(3.5, 0.2) and not faster(3.5, 0.2)  # clearly slower
    assert decided(0.80, 0.03) and faster(0.80, 0.03)  # clearly faster already
    assert not decided(0.95, 0.03)  # 5 % faster, known to 3 %: more rounds may tell
    assert not decided(0.80, None)  # too few rounds for an interval


def test_a_session_never_believes_a_gain_identical_copies_show():
    from accelopt.profiling.stats import faster

    # identical copies of the small matmul loop, each in its own kernel process, in one session
    # on the Intel VM: gains of 2.1 % and 2.6 %, each beyond twice its interval
    assert not faster(0.979, 0.009)
    assert not faster(0.974, 0.013)
    assert faster(0.96, 0.01)  # 4 %, known to 1 %: a gain


class _DriftingMachine:
    """Every slice of timing lasts one tick, and the machine is 1 % slower each tick (a
    neighbour's load growing): what the round's order has to cancel."""

    slice_floor: float | None = None  # no floor: the slices' batches were not read for waits

    def __init__(self) -> None:
        self.tick = 0

    def run_slice(self, seconds: float) -> list[float]:
        self.tick += 1
        return [1e-3 * (1 + 0.01 * self.tick)]


class _FakeRun:
    failed = False
    device = HostDevice()  # no kernel process to stop

    def recording(self) -> Any:
        from contextlib import nullcontext

        return nullcontext()


def _identical_kernels_on_a_drifting_machine(count: int) -> list[tuple[float, float]]:
    """Rounds of a worker's session (``RetimeRun._round``) over ``count`` identical kernels,
    each slice a tick later than the last: every kernel's median ratio to the first and its
    interval."""
    from accelopt.profiling.worker.retime import RetimeRun

    machine = _DriftingMachine()
    run = object.__new__(RetimeRun)  # the rounds alone: no worker, no kernels to build
    run.runs = [_FakeRun() for _ in range(count)]
    run.loops = dict.fromkeys(range(count), machine)
    run.series, run.rounds, run.slice_s, run._carried = [[] for _ in range(count)], 0, 0.01, None
    run.floor_series = [[] for _ in range(count)]
    run.clean_rounds = 0
    for _ in range(12):
        run._round()
    found = [ratio_estimate(round_ratios(run.series[0], run.series[i])) for i in range(1, count)]
    return [(ratio or 0.0, ci or 0.0) for ratio, ci in found]


def test_each_kernel_is_timed_between_two_slices_of_the_reference():
    # A B A C A: each ratio is to the reference's slices either side, so an even drift cancels
    # in every round (in A B C / C B A rounds it cancels only over pairs of rounds, and C's
    # ratio swung 2 % a round: the interval stayed wide, and sessions timed on to their cap)
    for ratio, ci in _identical_kernels_on_a_drifting_machine(3):
        assert ratio == pytest.approx(1.0, abs=1e-9)
        assert ci < 0.001


def test_a_session_ends_at_the_time_cap_of_all_its_kernels_together():
    from types import SimpleNamespace

    from accelopt.profiling.worker.retime import RetimeRun

    run = object.__new__(RetimeRun)
    run.config = EvalConfig(min_calls=5, min_time_s=0.02, ci_time_cap_s=1.0)
    run.min_rounds, run.rounds, run.clean_rounds = 8, 20, 20
    run.series = [[1e-3] * 20, [None] * 20, [None] * 20]  # no verdict: undecided
    # the reference flanks both others: twice their time, and the three together at the cap
    timed = {0: 1.5, 1: 0.75, 2: 0.75}
    run.loops = {i: SimpleNamespace(elapsed_s=s, count=100) for i, s in timed.items()}
    assert run._done()
    run.loops[0].elapsed_s = 1.4  # under 3 s together: on
    assert not run._done()


def test_a_session_of_disturbed_rounds_waits_past_its_cap_and_no_longer():
    """Rounds with a disturbed slice give no figure (``_flanked_round``): short of min_rounds
    that did, a session times on past its cap, by as long as each kernel's evaluation would wait
    (``disturbed_wait_s``), then ends undecided."""
    from types import SimpleNamespace

    from accelopt.profiling.worker.retime import RetimeRun

    run = object.__new__(RetimeRun)
    run.config = EvalConfig(min_calls=5, min_time_s=0.02, ci_time_cap_s=1.0, disturbed_wait_s=2.0)
    run.min_rounds, run.rounds, run.clean_rounds = 8, 20, 3
    run.series = [[1e-3] * 20, [None] * 20]
    run.loops = {0: SimpleNamespace(elapsed_s=2.0, count=100), 1: SimpleNamespace(elapsed_s=1.0,
                 count=100)}  # fmt: skip
    assert not run._done()  # at its cap (2 s), 3 clean rounds of 8: on
    run.loops[0].elapsed_s = 5.0  # 6 s: the cap and 2 s more per kernel
    assert run._done()


def test_a_slice_whose_floor_is_zero_gives_no_ratio_and_no_error():
    """A thread that waited longer than its batch took leaves a floor of nothing: that round
    has no floor ratio (it divided by zero, failing every kernel of the session, beside a test
    worker and two spinners per CPU)."""
    from accelopt.profiling.worker.retime import RetimeRun

    machine = _DriftingMachine()
    machine.slice_floor = 0.0
    run = object.__new__(RetimeRun)
    run.runs = [_FakeRun() for _ in range(2)]
    run.loops = dict.fromkeys(range(2), machine)
    run.series, run.rounds, run.slice_s, run._carried = [[], []], 0, 0.01, None
    run.floor_series, run.clean_rounds = [[], []], 0
    for _ in range(3):
        run._round()
    assert run.floor_series[1] == [None, None, None] and run.clean_rounds == 3
