"""Suite-wide invariants, for every problem: records complete, kernels shipped and correct.

Whether a shipped kernel beats this machine's measured ceilings is benchmarks/ceiling_check.py's
question: on a shared VM it is a timed assertion, which the tests do not make."""

from __future__ import annotations

import os

import numpy as np
import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.numpy.backend import reference_kernel
from accelopt.backends.status import Status
from accelopt.hardware.roofline import roofline
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import list_problems, load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.service import Evaluator

NAMES = list_problems()
# Roughly this machine's ceilings (2 Zen 5 cores), fixed so that record tests measure nothing.
NOMINAL = HardwareSpec(
    name="cpu:nominal", backend="cpu", matmul_rate=545e9, vector_rate=520e9, bandwidth=48e9,
    cores=2, llc_bytes=32 << 20,
)  # fmt: skip


def shipped(name: str) -> list[Kernel]:
    problem = load_problem(name)
    kernels = [reference_kernel(problem)]
    for kind in ("baseline", "expert"):
        path = problem.kernel_path(kind)
        if path.is_file():
            kernels.append(Kernel(path.read_text(), "cpu", kind))
    return kernels


def test_the_suite_has_the_nkibench_operators():
    assert len(NAMES) >= 3


@pytest.mark.parametrize("name", NAMES)
def test_records_are_complete(name):
    problem = load_problem(name)
    assert problem.description and problem.tolerance > 0
    assert {"paper", "cpu", "small"} <= set(problem.workloads)
    for workload in problem.workloads.values():
        assert set(workload.sizes) == set(problem.params)
        cost = problem.cost.evaluate(workload.sizes)
        assert min(cost.matmul_flops, cost.vector_flops, cost.bytes) >= 0
        assert cost.bytes > 0
    assert problem.kernel_path("baseline").is_file()


@pytest.mark.parametrize("name", NAMES)
def test_cpu_workload_roofline_is_between_0_2_and_5_ms(name):
    problem = load_problem(name)
    peak = roofline(problem.cost.evaluate(problem.workload("cpu").sizes), NOMINAL).peak_s
    assert 0.2e-3 <= peak <= 5e-3


@pytest.mark.parametrize("name", NAMES)
def test_generator_and_reference_shapes(name):
    problem = load_problem(name)
    sizes = problem.workload("small").sizes
    a, b = problem.generate(sizes, 1), problem.generate(sizes, 2)
    assert [x.shape for x in a] == [t.dims(sizes) for t in problem.inputs]
    assert all(x.dtype == np.float32 and np.any(x != 0) for x in a)
    assert all(np.array_equal(x, y) for x, y in zip(a, problem.generate(sizes, 1), strict=True))
    assert any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    outs = problem.reference(*a)
    assert [o.shape for o in outs] == problem.output_shapes(sizes)
    assert all(o.dtype == np.float32 and np.isfinite(o).all() for o in outs)


@pytest.fixture(scope="module")
def cache_env(tmp_path_factory):
    old = os.environ.get("ACCELOPT_CACHE_DIR")
    os.environ["ACCELOPT_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        del os.environ["ACCELOPT_CACHE_DIR"]
    else:
        os.environ["ACCELOPT_CACHE_DIR"] = old


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_shipped_kernel_passes_on_the_small_workload(cache_env):
    jobs = [(k, load_problem(n), "small") for n in NAMES for k in shipped(n)]
    with Evaluator(NOMINAL, EvalConfig(check_only=True)) as evaluator:
        failures = [
            f"{e.problem}/{e.kernel}: {e.status.value} {e.error}"
            for e in evaluator.evaluate_many(jobs)
            if e.status is not Status.PASSED
        ]
    assert not failures
