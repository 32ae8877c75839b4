"""Every shipped expert builds and passes wherever the cpu backend runs: each is compiled for the
three x86-64 levels (SSE4.2 only, AVX2 + FMA, AVX-512), and checked on every level this CPU can
execute (the aarch64 builds are in tests/backends/test_aarch64_cross.py)."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from parallel_eval import evaluate_in_parallel
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.hardware.cpuinfo import CPUINFO
from accelopt.problems import list_problems, load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.evaluator import Evaluator

# The CPU flags (as /proc/cpuinfo spells them) each level needs, beyond the previous level's.
LEVELS = {
    "x86-64-v2": {"sse4_2", "popcnt", "ssse3"},
    "x86-64-v3": {"avx", "avx2", "fma", "bmi2", "f16c", "movbe"},
    "x86-64-v4": {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"},
}
EXPERTS = [n for n in list_problems() if shipped_kernel(load_problem(n), "expert").is_file()]
SPEC = make_spec()  # check_only: the ceilings are never used
pytestmark = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 levels need x86-64"
)


def cpu_flags(cpuinfo: Path = CPUINFO) -> set[str]:
    for line in cpuinfo.read_text(errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return set()


def runnable(level: str) -> bool:
    """Whether this CPU has every feature of ``level`` and of the levels below it."""
    needed: set[str] = set()
    for name, flags in LEVELS.items():
        needed |= flags
        if name == level:
            break
    return needed <= cpu_flags()


def test_every_suite_problem_ships_an_expert_that_declares_its_tunables():
    from accelopt.backends.tunables import find_tunables
    from accelopt.problems.loader import suite_names

    assert set(suite_names()) <= set(EXPERTS)
    for name in suite_names():
        tunables = find_tunables(shipped_kernel(load_problem(name), "expert").read_text())
        assert tunables, f"{name}/expert.c declares no tunable"


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("level", list(LEVELS))
def test_every_expert_builds_and_passes_at_each_level(level, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ACCELOPT_CPU_TARGET", level)  # workers inherit it
    run = runnable(level)
    # A level this CPU cannot execute is still built: its kernels would die of SIGILL, so the
    # check stops after the build (a CRASH then says nothing about the kernel).
    config = EvalConfig(check_only=True, seeds=2, workers=2)
    jobs = []
    for name in EXPERTS:
        problem = load_problem(name)
        kernel = Kernel(shipped_kernel(problem, "expert").read_text(), "cpu", f"expert@{level}")
        jobs.append((kernel, problem, "small" if run else "tiny"))
    with Evaluator(SPEC, config) as evaluator:
        evaluations = list(evaluate_in_parallel(evaluator, jobs))
    built = [e for e in evaluations if e.status not in (Status.COMPILE_ERROR, Status.REJECTED)]
    assert len(built) == len(EXPERTS), [(e.problem, e.error[:300]) for e in evaluations]
    if run:
        failed = [(e.problem, e.status.value, e.error[:300]) for e in evaluations if not e.passed]
        assert not failed
