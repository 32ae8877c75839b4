"""Load is reported, not punished: deadlines follow the kernel's own calls, waiting for the device
is nobody's deadline, the median's confidence interval decides how long to time, and what others
took of the machine is measured."""

from __future__ import annotations

import math
import os
import threading
import time

import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.hardware import devicelock
from accelopt.hardware.load import CpuTimes
from accelopt.problems import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.deadlines import TIMING, CallClock, Deadlines
from accelopt.profiling.parent.evaluator import Evaluator
from accelopt.profiling.parent.pool import WorkerProcess
from accelopt.profiling.stats import ci_half_width, interval, is_busy, median_ci_ranks, summarize
from accelopt.profiling.worker.contention import Contention, CpuSnapshot, contention, snapshot
from accelopt.profiling.worker.pacing import Precision
from accelopt.profiling.worker.protocol import EvaluationAnswer

DEADLINES = Deadlines(compile_s=150.0, call_s=3.0, reference_s=120.0, timing_floor_s=10.0)


def test_a_timed_call_gets_a_multiple_of_the_slowest_checked_call():
    assert DEADLINES.for_phase("call", TIMING, slowest_call_s=0.5) == 25.0  # 50 x 0.5 s
    assert DEADLINES.for_phase("call", TIMING, slowest_call_s=0.01) == 10.0  # the floor
    assert DEADLINES.for_phase("call", TIMING, slowest_call_s=None) == 3.0  # none seen yet
    assert DEADLINES.for_phase("call", "seed 1 of 5", slowest_call_s=0.5) == 3.0


def test_the_parent_times_the_correctness_calls_from_phase_messages():
    clock = CallClock()
    clock.saw("reference", "seeds 1-2 of 5", now=0.0)
    clock.saw("call", "seed 1 of 5", now=1.0)
    clock.saw("call", "seed 2 of 5", now=1.4)  # seed 1 took 0.4 s
    clock.saw("reference", "seeds 3-4 of 5", now=2.1)  # seed 2 took 0.7 s
    clock.saw("lock", "", now=9.0)  # references are not calls
    clock.saw("call", TIMING, now=30.0)  # nor is waiting for the device
    clock.saw("call", TIMING, now=31.0)  # timed calls do not raise their own deadline
    assert clock.slowest_s == pytest.approx(0.7)


def test_a_call_ends_when_its_outputs_are_checked():
    clock = CallClock()
    clock.saw("call", "seed 1 of 5", now=1.0)
    clock.saw("check", "seed 1 of 5", now=1.1)  # the call took 0.1 s...
    clock.saw("prepare", "", now=5.0)  # ... however long checking it took
    assert clock.slowest_s == pytest.approx(0.1)


def test_waiting_for_the_device_has_a_long_deadline_even_the_verification():
    assert DEADLINES.for_phase("lock") == DEADLINES.lock_s
    assert DEADLINES.for_phase("verify") == 120.0


def test_the_harness_work_between_calls_has_the_references_deadline():
    # Checking outputs and filling the timed calls' buffers, not the kernel: a busy machine slows
    # them, and a call's few seconds must not kill a correct kernel's worker.
    assert DEADLINES.for_phase("check", "seed 5 of 5") == DEADLINES.reference_s
    assert DEADLINES.for_phase("prepare") == DEADLINES.reference_s


def test_median_interval_ranks_follow_the_binomial_rule():
    assert median_ci_ranks(100) == (39, 60)  # the textbook 95 % ranks 40 and 61, 1-based
    assert median_ci_ranks(5) == (0, 4)  # too few samples: the extremes
    low, high = interval(list(range(1, 101)))
    assert (low, high) == (40.0, 61.0)


def test_the_interval_is_unknown_below_six_samples_and_narrows_with_more():
    assert math.isinf(ci_half_width([1.0, 1.1, 0.9, 1.0, 1.0]))
    wide = [1.0 + 0.1 * ((i * 7) % 11 - 5) / 5 for i in range(30)]
    assert ci_half_width(wide * 20) < ci_half_width(wide)
    stats = summarize(wide)
    assert stats.ci_low_s <= stats.latency_s <= stats.ci_high_s
    assert stats.ci == pytest.approx(ci_half_width(wide))


def test_precision_is_checked_at_intervals():
    precise = Precision(0.01)
    steady = [1e-3] * 40
    assert precise(steady, 0.0) is True
    assert precise(steady, 0.01) is False  # too soon after the last check
    noisy = [1e-3 * (1 + (i % 2)) for i in range(40)]
    assert precise(noisy, 0.2) is False


def test_others_share_is_the_machines_cpu_time_less_our_own():
    before = CpuSnapshot(CpuTimes(total=1000, steal=0, idle=900), own=50)
    # 200 ticks on the CPUs: we used 100, somebody else 60, 40 idle
    seen = contention(before, CpuSnapshot(CpuTimes(1200, 0, 940), own=150))
    assert (
        seen.others == pytest.approx(0.3) and seen.steal == 0.0 and is_busy(seen.others, seen.steal)
    )
    quiet = contention(before, CpuSnapshot(CpuTimes(1200, 0, 900), own=250))
    assert quiet == Contention(0.0, 0.0) and not is_busy(quiet.others, quiet.steal)
    stolen = contention(before, CpuSnapshot(CpuTimes(1200, 20, 980), own=150))
    assert stolen.steal == pytest.approx(0.1) and is_busy(0.0, stolen.steal)
    assert contention(before, before) == Contention(0.0, 0.0)  # no time passed


def test_the_kernel_process_cpu_time_counts_as_ours_not_others():
    import subprocess
    import sys

    # A child spins 0.5 s of CPU, says so, then sleeps: as the cpu backend's kernel process does
    # while timed (alive when both snapshots are taken).
    spin = (
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
        "print('spun', flush=True)\ntime.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True)
    try:
        before = snapshot((child.pid,))
        assert child.stdout is not None and child.stdout.readline().strip() == "spun"
        after = snapshot((child.pid,))
    finally:
        child.kill()
        child.wait()
    assert before is not None and after is not None
    assert after.own - before.own >= 0.2 * os.sysconf("SC_CLK_TCK")


def test_a_snapshot_reads_this_machine():
    now = snapshot()
    assert now is None or (now.machine.total > 0 and now.own >= 0)


@pytest.mark.timeout(120)
def test_a_worker_waiting_for_the_device_is_not_timed_out(accelopt_cache, hw):
    """Before a kernel runs, and before its timed outputs are verified, the worker waits for
    whoever times a kernel now; a short start deadline must not kill it meanwhile."""
    problem = load_problem("silu")
    kernel = Kernel(shipped_kernel(problem, "baseline").read_text())
    evaluator = Evaluator(hw, EvalConfig(workers=1, seed=3, seeds=1, min_calls=3, min_time_s=0))
    request = evaluator._request(kernel, problem, "small", [3])
    evaluator.close()
    worker = WorkerProcess(dict(os.environ), lock_path=evaluator.lock_path)
    deadlines = Deadlines(compile_s=150.0, call_s=30.0, reference_s=120.0, start_s=1.0)
    held = threading.Event()

    def hold_the_device() -> None:
        with devicelock.exclusive(evaluator.lock_path):
            held.set()
            time.sleep(3.0)

    holder = threading.Thread(target=hold_the_device)
    holder.start()
    held.wait(10)
    try:
        answer = worker.ask(request, deadlines)
    finally:
        holder.join()
        worker.shutdown()
    assert isinstance(answer, EvaluationAnswer)
    result = answer.result
    assert result.status is None, result
    assert result.ci_low_s is not None and result.ci_high_s is not None
    assert result.latency_s is not None
    assert result.ci_low_s <= result.latency_s <= result.ci_high_s


@pytest.mark.timeout(120)
def test_an_evaluation_reports_its_interval_and_the_load(accelopt_cache, hw):
    problem = load_problem("silu")
    kernel = Kernel(shipped_kernel(problem, "baseline").read_text())
    with Evaluator(hw, EvalConfig(workers=1, seeds=1, min_calls=5, min_time_s=0)) as evaluator:
        evaluation = evaluator.evaluate(kernel, problem, "small")
    assert evaluation.status is Status.PASSED, evaluation.error
    assert evaluation.ci is not None and evaluation.ci >= 0
    assert evaluation.load_others is not None and 0.0 <= evaluation.load_others <= 1.0
    assert evaluation.load_steal is not None and evaluation.load_steal >= 0.0


@pytest.mark.timeout(120)
def test_a_correctness_call_phase_ends_when_the_kernel_returns(accelopt_cache, hw):
    """The worker says so as soon as each correctness call returns, and before it fills the
    timed calls' buffers: only the kernel's own time runs under the call's deadline."""
    problem = load_problem("silu")
    kernel = Kernel(shipped_kernel(problem, "baseline").read_text())
    evaluator = Evaluator(hw, EvalConfig(workers=1, seeds=2, min_calls=3, min_time_s=0))
    request = evaluator._request(kernel, problem, "small", [1, 2])
    evaluator.close()
    worker = WorkerProcess(dict(os.environ), lock_path=evaluator.lock_path)
    steps: list[tuple[str, str]] = []
    try:
        worker.channel.send(request)
        while (message := worker.channel.recv(60)) is not None and message["type"] == "phase":
            steps.append((message["phase"], message["detail"]))
    finally:
        worker.shutdown()
    assert message is not None and message["type"] == "result", steps
    calls = [i for i, (phase, detail) in enumerate(steps) if phase == "call" and detail != TIMING]
    assert [steps[i][1] for i in calls] == ["seed 1 of 2", "seed 2 of 2"]
    assert all(steps[i + 1] == ("check", steps[i][1]) for i in calls), steps
    timing = steps.index(("call", TIMING))
    assert ("prepare", "") in steps[calls[-1] : timing], steps
