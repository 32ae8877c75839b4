"""Suite-wide invariants, for every problem of the suite: the exact set of problems, records
complete, generators and references that hold for all, kernels shipped and correct. (What is
particular to one problem is in its own test file.)

Whether a shipped kernel beats this machine's measured ceilings is benchmarks/ceiling_check.py's
question: on a shared VM it is a timed assertion, which the tests do not make."""

from __future__ import annotations

import os

import numpy as np
import pytest
from parallel_eval import evaluate_in_parallel
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.backends.numpy.backend import reference_kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.hardware.roofline import roofline
from accelopt.problems import UnknownProblemError, load_problem
from accelopt.problems.loader import suite_names
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.evaluator import Evaluator

# What src/accelopt/problems/suite/ holds: a problem lost from the suite (or one added without
# being listed here) fails test_the_suite_is_exactly_these_problems.
SUITE = {
    "adamw",
    "add_rmsnorm_matmul",
    "bmm",
    "bmm_softmax",
    "gqa_full",
    "lora",
    "mamba",
    "matmul",
    "matmul_add_rmsnorm",
    "rmsnorm_matmul",
    "rope_single_freq_apply",
    "silu",
    "swiglu",
    "transpose_matmul",
}
NAMES = suite_names()  # what the loader finds: every problem found is checked below
# Roughly this machine's ceilings (2 Zen 5 cores), fixed so that record tests measure nothing; the
# 0.2-5 ms bound on the cpu workloads' rooflines is stated against these figures.
NOMINAL = make_spec(name="cpu:nominal", matmul_rate=545e9, vector_rate=520e9, bandwidth=48e9)


def rel_l2(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def shipped(name: str) -> list[Kernel]:
    problem = load_problem(name)
    kernels = [reference_kernel(problem)]
    for kind in ("baseline", "expert"):
        path = shipped_kernel(problem, kind)
        if path.is_file():
            kernels.append(Kernel(path.read_text(), "cpu", kind))
    return kernels


def test_the_suite_is_exactly_these_problems():
    assert set(NAMES) == SUITE


def test_an_unknown_problem_names_every_suite_problem():
    with pytest.raises(UnknownProblemError) as info:
        load_problem("no_such_problem")
    for name in SUITE:
        assert name in str(info.value)


@pytest.mark.parametrize("name", NAMES)
def test_records_are_complete(name):
    problem = load_problem(name)
    assert problem.name == name
    assert problem.description and problem.tolerance > 0
    assert {"paper", "cpu", "small"} <= set(problem.workloads)
    for workload in problem.workloads.values():
        assert set(workload.sizes) == set(problem.params)
        assert all(isinstance(v, int) and v > 0 for v in workload.sizes.values())
        cost = problem.cost.at(workload.sizes)
        assert min(cost.matmul_flops, cost.vector_flops, cost.bytes) >= 0
        assert cost.bytes > 0
    assert "void kernel(" in shipped_kernel(problem, "baseline").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_unknown_workload_names_the_known_ones(name):
    with pytest.raises(KeyError, match="cpu"):
        load_problem(name).workload("nope")


@pytest.mark.parametrize("name", NAMES)
def test_cpu_workload_roofline_is_between_0_2_and_5_ms(name):
    problem = load_problem(name)
    peak = roofline(problem.cost.at(problem.workload("cpu").sizes), NOMINAL).peak_s
    assert 0.2e-3 <= peak <= 5e-3


@pytest.mark.parametrize("name", NAMES)
def test_cost_bytes_cover_the_buffers(name):
    # Every problem's cost model reads each input and writes each output once.
    problem = load_problem(name)
    sizes = problem.workload("cpu").sizes
    assert problem.cost.at(sizes).bytes == problem.buffer_bytes(sizes)


@pytest.mark.parametrize("name", NAMES)
def test_generator(name):
    problem = load_problem(name)
    sizes = problem.workload("small").sizes
    a, b, c = problem.generate(sizes, 7), problem.generate(sizes, 7), problem.generate(sizes, 8)
    assert len(a) == len(problem.inputs)
    for spec, x, y, z in zip(problem.inputs, a, b, c, strict=True):
        assert x.shape == spec.dims(sizes)
        assert x.dtype == np.float32 and x.flags.c_contiguous
        assert np.all(np.isfinite(x)) and np.any(x != 0)
        np.testing.assert_array_equal(x, y)  # the same seed, the same inputs
        assert not np.array_equal(x, z)  # another seed, other values in every input


@pytest.mark.parametrize("name", NAMES)
def test_reference_keeps_float32(name):
    """On float32 inputs the reference answers in float32, as close to its own float64 answer as
    the problem's tolerance; on float64 inputs it stays in float64."""
    problem = load_problem(name)
    sizes = problem.workload("small").sizes
    inputs = problem.generate(sizes, seed=5)
    outputs = problem.reference(*inputs)
    assert isinstance(outputs, tuple) and len(outputs) == len(problem.outputs)
    for out, shape in zip(outputs, problem.output_shapes(sizes), strict=True):
        assert out.dtype == np.float32 and out.shape == shape
        assert np.all(np.isfinite(out))
    ref64 = problem.reference(*(x.astype(np.float64) for x in inputs))
    for out, ref in zip(outputs, ref64, strict=True):
        assert ref.dtype == np.float64
        assert rel_l2(out.astype(np.float64), ref) < problem.tolerance


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
            for e in evaluate_in_parallel(evaluator, jobs)
            if e.status is not Status.PASSED
        ]
    assert not failures
