"""The first problems of the suite: records, references, cost models, generators, workloads."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelopt.problems import UnknownProblemError, list_problems, load_problem

NAMES = ("silu", "matmul", "rmsnorm_matmul")

PAPER_SIZES = {
    "silu": {"M": 4096, "N": 7168},
    "matmul": {"M": 4096, "N": 12288, "K": 5120},
    "rmsnorm_matmul": {"M": 4096, "N": 2048, "K": 1024},
}

SMALL_SIZES = {
    "silu": {"M": 5, "N": 7},
    "matmul": {"M": 5, "N": 7, "K": 6},
    "rmsnorm_matmul": {"M": 5, "N": 7, "K": 6},
}

# This machine's ceilings (2 cores): FP32 FLOP/s for both units, and DRAM bytes/s.
CPU_RATE = 545e9
CPU_BANDWIDTH = 45e9


def rel_l2(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def test_list_problems_contains_the_three():
    assert set(NAMES) <= set(list_problems())


@pytest.mark.parametrize("name", NAMES)
def test_workloads_are_bound(name):
    problem = load_problem(name)
    assert problem.name == name
    assert problem.description
    assert {"paper", "cpu"} <= set(problem.workloads)
    for workload in problem.workloads.values():
        assert set(workload.sizes) == set(problem.params)
        assert all(isinstance(v, int) and v > 0 for v in workload.sizes.values())
    assert dict(problem.workload("paper").sizes) == PAPER_SIZES[name]


@pytest.mark.parametrize("name", NAMES)
def test_unknown_workload_names_the_known_ones(name):
    with pytest.raises(KeyError, match="cpu"):
        load_problem(name).workload("nope")


@pytest.mark.parametrize("name", NAMES)
def test_cpu_roofline_fits_this_machine(name):
    problem = load_problem(name)
    cost = problem.cost.evaluate(problem.workload("cpu").sizes)
    peak_s = max(
        cost.matmul_flops / CPU_RATE, cost.vector_flops / CPU_RATE, cost.bytes / CPU_BANDWIDTH
    )
    assert 0.2e-3 <= peak_s <= 5e-3


@pytest.mark.parametrize("name", NAMES)
def test_cpu_workload_keeps_the_aspect_ratio(name):
    problem = load_problem(name)
    paper, cpu = problem.workload("paper").sizes, problem.workload("cpu").sizes
    params = problem.params
    for a in params:
        for b in params:
            assert cpu[a] / cpu[b] == pytest.approx(paper[a] / paper[b], rel=0.1)


@pytest.mark.parametrize("name", NAMES)
def test_baseline_kernel_exists(name):
    path = load_problem(name).kernel_path("baseline")
    assert path.is_file()
    assert "void kernel(" in path.read_text()


def test_unknown_problem_names_the_known_ones():
    with pytest.raises(UnknownProblemError) as info:
        load_problem("no_such_problem")
    for name in NAMES:
        assert name in str(info.value)


# --- references against independent formulations, in float64 -------------------------------


def test_silu_reference():
    problem = load_problem("silu")
    (x,) = problem.generate(SMALL_SIZES["silu"], seed=1)
    x = x.astype(np.float64)
    (y,) = problem.reference(x)
    expected = x * 0.5 * (1.0 + np.tanh(x / 2.0))
    assert y.dtype == np.float64
    assert rel_l2(y, expected) < 1e-13
    # Scalar formula, element by element.
    loops = np.array([[v / (1.0 + math.exp(-v)) for v in row] for row in x])
    np.testing.assert_allclose(y, loops, rtol=1e-14)


def test_silu_reference_extremes_are_finite():
    (y,) = load_problem("silu").reference(np.array([[-200.0, 0.0, 200.0]], dtype=np.float32))
    np.testing.assert_allclose(y, [[0.0, 0.0, 200.0]], atol=1e-30)


def test_matmul_reference():
    problem = load_problem("matmul")
    sizes = SMALL_SIZES["matmul"]
    lhs, rhs = (a.astype(np.float64) for a in problem.generate(sizes, seed=2))
    (out,) = problem.reference(lhs, rhs)
    assert out.shape == (sizes["M"], sizes["N"])
    assert out.dtype == np.float64
    loops = np.zeros((sizes["M"], sizes["N"]))
    for i in range(sizes["M"]):
        for j in range(sizes["N"]):
            loops[i, j] = sum(lhs[i, k] * rhs[k, j] for k in range(sizes["K"]))
    np.testing.assert_allclose(out, loops, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out, np.einsum("mk,kn->mn", lhs, rhs), rtol=1e-12, atol=1e-12)


def test_rmsnorm_matmul_reference():
    problem = load_problem("rmsnorm_matmul")
    sizes = SMALL_SIZES["rmsnorm_matmul"]
    x, w = (a.astype(np.float64) for a in problem.generate(sizes, seed=3))
    (out,) = problem.reference(x, w)
    assert out.shape == (sizes["M"], sizes["N"])
    assert out.dtype == np.float64
    # Scale the output rows instead of the input rows, with the RMS from the vector norm.
    inv_rms = math.sqrt(sizes["K"]) / np.linalg.norm(x, axis=1)
    expected = np.einsum("mk,kn->mn", x, w) * inv_rms[:, None]
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    # Explicit loops.
    loops = np.zeros((sizes["M"], sizes["N"]))
    for i in range(sizes["M"]):
        rms = math.sqrt(sum(v * v for v in x[i]) / sizes["K"])
        for j in range(sizes["N"]):
            loops[i, j] = sum(x[i, k] / rms * w[k, j] for k in range(sizes["K"]))
    np.testing.assert_allclose(out, loops, rtol=1e-12, atol=1e-12)


def test_rmsnorm_matmul_has_no_epsilon():
    # A row scaled by a tiny factor normalizes to the same output: no epsilon in the RMS.
    problem = load_problem("rmsnorm_matmul")
    x, w = (a.astype(np.float64) for a in problem.generate(SMALL_SIZES["rmsnorm_matmul"], 4))
    (a,) = problem.reference(x, w)
    (b,) = problem.reference(x * 1e-6, w)
    np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_reference_keeps_float32(name):
    problem = load_problem(name)
    sizes = SMALL_SIZES[name]
    inputs = problem.generate(sizes, seed=5)
    outputs = problem.reference(*inputs)
    assert isinstance(outputs, tuple)
    assert len(outputs) == len(problem.outputs)
    for out, shape in zip(outputs, problem.output_shapes(sizes), strict=True):
        assert out.dtype == np.float32
        assert out.shape == shape
    ref64 = problem.reference(*(a.astype(np.float64) for a in inputs))
    for out, ref in zip(outputs, ref64, strict=True):
        assert rel_l2(out.astype(np.float64), ref) < problem.tolerance


# --- cost models, computed by hand on M=2, N=3, K=4 -----------------------------------------

HAND_SIZES = {"M": 2, "N": 3, "K": 4}
HAND_COST = {
    # silu: vector 3MN = 18, bytes 8MN = 48.
    "silu": (0.0, 18.0, 48.0),
    # matmul: 2MNK = 48; bytes 4(MN + NK + MK) = 4(6 + 12 + 8) = 104.
    "matmul": (48.0, 0.0, 104.0),
    # rmsnorm_matmul: 2MNK = 48; vector 4MK = 32; bytes 4(MK + KN + MN) = 104.
    "rmsnorm_matmul": (48.0, 32.0, 104.0),
}


@pytest.mark.parametrize("name", NAMES)
def test_cost_model_by_hand(name):
    problem = load_problem(name)
    sizes = {p: HAND_SIZES[p] for p in problem.params}
    cost = problem.cost.evaluate(sizes)
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == HAND_COST[name]


def test_cost_model_paper_sizes():
    mm = load_problem("matmul").cost.evaluate(PAPER_SIZES["matmul"])
    assert mm.matmul_flops == 2 * 4096 * 12288 * 5120
    rm = load_problem("rmsnorm_matmul").cost.evaluate(PAPER_SIZES["rmsnorm_matmul"])
    assert rm.vector_flops == 4 * 4096 * 1024


@pytest.mark.parametrize("name", NAMES)
def test_cost_bytes_cover_the_buffers(name):
    # Every term here reads each input and writes each output once.
    problem = load_problem(name)
    sizes = problem.workload("cpu").sizes
    assert problem.cost.evaluate(sizes).bytes == problem.buffer_bytes(sizes)


# --- input generator ------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_generator(name):
    problem = load_problem(name)
    sizes = SMALL_SIZES[name]
    a = problem.generate(sizes, seed=7)
    b = problem.generate(sizes, seed=7)
    c = problem.generate(sizes, seed=8)
    assert len(a) == len(problem.inputs)
    for spec, x, y, z in zip(problem.inputs, a, b, c, strict=True):
        assert x.shape == spec.dims(sizes)
        assert x.dtype == np.float32
        assert x.flags.c_contiguous
        assert np.all(np.isfinite(x))
        assert np.any(x != 0)
        np.testing.assert_array_equal(x, y)
        assert not np.array_equal(x, z)
