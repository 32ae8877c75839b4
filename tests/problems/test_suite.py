"""The first problems of the suite (silu, matmul, rmsnorm_matmul): paper sizes, references, cost
models. What holds for every problem of the suite is in test_all_problems.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelopt.problems import load_problem

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


def rel_l2(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("name", NAMES)
def test_paper_sizes(name):
    assert dict(load_problem(name).workload("paper").sizes) == PAPER_SIZES[name]


@pytest.mark.parametrize("name", NAMES)
def test_cpu_workload_keeps_the_aspect_ratio(name):
    problem = load_problem(name)
    paper, cpu = problem.workload("paper").sizes, problem.workload("cpu").sizes
    params = problem.params
    for a in params:
        for b in params:
            assert cpu[a] / cpu[b] == pytest.approx(paper[a] / paper[b], rel=0.1)


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
    cost = problem.cost.at(sizes)
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == HAND_COST[name]


def test_cost_model_paper_sizes():
    mm = load_problem("matmul").cost.at(PAPER_SIZES["matmul"])
    assert mm.matmul_flops == 2 * 4096 * 12288 * 5120
    rm = load_problem("rmsnorm_matmul").cost.at(PAPER_SIZES["rmsnorm_matmul"])
    assert rm.vector_flops == 4 * 4096 * 1024
