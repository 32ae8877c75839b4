"""Hostile kernels that pass the source checks, through one Evaluator: each ends with a status and
a sentence naming the cause, and harms nothing (no key in a log, no state or memory left for the
next kernel, no device blocked). The attempts that need code to run past the checks are in
``tests/backends/test_kernel_host.py``."""

from __future__ import annotations

import platform
import time
from pathlib import Path

import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.hardware import devicelock
from accelopt.problems import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.evaluator import Evaluator

CONFIG = EvalConfig(
    seeds=3,
    warmup_calls=2,
    min_calls=5,
    min_time_s=0.02,
    ci_time_cap_s=0.3,
    call_timeout_floor_s=5.0,
    workers=1,  # one worker: what a kernel leaves behind would reach the next one
    memory_cap_bytes=1 << 30,
    verify_calls=4,
)
SECRET = "sk-accelopt-test-9f8e7d6c5b4a"


def evaluate(evaluator: Evaluator, silu: Problem, kernel: Kernel) -> Evaluation:
    return evaluator.evaluate(kernel, silu, "cpu")


def test_the_kernel_runs_in_a_sandboxed_process(evaluator, silu, kernel_file):
    evaluation = evaluate(evaluator, silu, kernel_file("correct_sigmoid"))
    assert evaluation.status is not Status.CRASH, evaluation.error
    assert evaluation.isolation is not None
    assert evaluation.isolation["seccomp"] == "1" and evaluation.isolation["seccomp_load"] == "1"


def test_recomputing_only_the_canaries_is_incorrect(accelopt_cache, hw, silu, kernel_file):
    # One rotation set: every timed call meets an output buffer the kernel has seen.
    config = CONFIG.model_copy(update={"rotation_budget_bytes": 1})
    with Evaluator(hw, config) as evaluator:
        evaluation = evaluate(evaluator, silu, kernel_file("recomputes_canaries"))
    assert evaluation.status is Status.INCORRECT, evaluation.error
    assert "timed call" in evaluation.error and "checked afterwards" in evaluation.error


def test_fp_and_openmp_state_do_not_reach_the_next_kernel(evaluator, silu, kernel_file):
    first = evaluate(evaluator, silu, kernel_file("leaves_fp_state"))
    # Its own next call may trap on the exceptions it unmasked: its own failure, not the next's.
    assert first.status in (Status.PASSED, Status.CRASH), first.error
    after = evaluate(evaluator, silu, kernel_file("reports_its_state"))
    assert after.status is Status.PASSED, after.error  # unmasked FP exceptions would kill it
    expected = f"threads={evaluator.threads} dynamic=0"
    assert expected in after.log, after.log
    assert "levels=0 " not in after.log
    if platform.machine() == "x86_64":
        assert "mxcsr=1f80" in after.log  # the default: all masked, round to nearest, no FTZ


def test_writing_just_before_the_output_is_incorrect(evaluator, silu, kernel_file):
    evaluation = evaluate(evaluator, silu, kernel_file("writes_y_minus_one"))
    assert evaluation.status is Status.INCORRECT
    assert "1 float before the start of output 'y'" in evaluation.error


def _worker_rss_kib(evaluator: Evaluator) -> tuple[int, int]:
    (worker,) = evaluator.pool._idle
    status = Path(f"/proc/{worker.proc.pid}/status").read_text().splitlines()
    return worker.proc.pid, int(next(x for x in status if x.startswith("VmRSS:")).split()[1])


def test_memory_a_kernel_leaks_is_gone_with_its_process(evaluator, silu, kernel_file):
    assert evaluate(evaluator, silu, kernel_file("correct_sigmoid")).status is not Status.CRASH
    pid, before_kib = _worker_rss_kib(evaluator)  # what the worker keeps: references, arrays
    leaker = evaluate(evaluator, silu, kernel_file("leaks_memory"))
    # Capped at 1 GiB beyond its buffers, its mallocs fail after a few calls: it still computes.
    assert leaker.status in (Status.PASSED, Status.CRASH), leaker.error
    after_pid, after_kib = _worker_rss_kib(evaluator)
    grown_kib = after_kib - before_kib if after_pid == pid else after_kib
    assert grown_kib < 256 << 10  # the worker never held the leak (1 GiB): it went with its process
    assert evaluate(evaluator, silu, kernel_file("correct_sigmoid")).status is not Status.CRASH


def test_a_leaked_key_never_reaches_the_log(evaluator, silu, kernel_file, monkeypatch):
    monkeypatch.setenv("TEST_PROVIDER_API_KEY", SECRET)
    evaluation = evaluate(evaluator, silu, kernel_file("prints_a_secret"))
    assert evaluation.status is Status.PASSED, evaluation.error
    assert "found key: [redacted]" in evaluation.log
    assert SECRET not in evaluation.log and SECRET not in evaluation.model_dump_json()


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("constructor_through_macros", "'constructor' attribute"),
        ("nested_function", "a function defined inside another function"),
    ],
)
def test_load_time_and_stack_code_are_refused(evaluator, silu, kernel_file, name, cause):
    evaluation = evaluate(evaluator, silu, kernel_file(name))
    assert evaluation.status is Status.REJECTED, evaluation.error
    assert cause in evaluation.error


def test_an_oversized_source_is_rejected_in_the_parent(evaluator, silu):
    source = "/*" + "x" * (2 << 20) + "*/\nvoid kernel(const float *x, float *y) { }\n"
    start = time.monotonic()
    evaluation = evaluate(evaluator, silu, Kernel(source, "cpu", "huge"))
    assert evaluation.status is Status.REJECTED and "limit" in evaluation.error
    assert evaluation.compile_s is None  # refused before any worker was asked
    assert time.monotonic() - start < 30


def test_a_device_lock_held_forever_is_a_timeout(accelopt_cache, hw, silu, kernel_file):
    config = CONFIG.model_copy(update={"lock_timeout_s": 2.0})
    with Evaluator(hw, config) as evaluator:
        assert evaluate(evaluator, silu, kernel_file("correct_sigmoid")).status is not None
        with devicelock.exclusive(evaluator.lock_path):  # a holder that never lets go
            start = time.monotonic()
            evaluation = evaluate(evaluator, silu, kernel_file("correct_sigmoid"))
    assert evaluation.status is Status.TIMEOUT
    assert "waiting for the device ran past its 2 s deadline" in evaluation.error
    assert time.monotonic() - start < 30
