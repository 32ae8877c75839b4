"""add_rmsnorm_matmul: reference against independent formulations, paper sizes, cost."""

from __future__ import annotations

import math

import numpy as np

from accelopt.problems import load_problem

SIZES = {"M": 5, "N": 7, "K": 6}


def rel_l2(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def test_reference_against_einsum_and_loops():
    problem = load_problem("add_rmsnorm_matmul")
    x, z, g, w = (a.astype(np.float64) for a in problem.generate(SIZES, seed=1))
    (out,) = problem.reference(x, z, g, w)
    assert out.shape == (SIZES["M"], SIZES["N"])
    assert out.dtype == np.float64
    # Fold the gain into the weights and scale the output rows by the inverse RMS instead.
    y = x + z
    rms = np.sqrt((np.linalg.norm(y, axis=1) / math.sqrt(SIZES["K"])) ** 2 + 1e-5)
    expected = np.einsum("mk,kn->mn", y, g[:, None] * w) / rms[:, None]
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    # Explicit loops.
    loops = np.zeros((SIZES["M"], SIZES["N"]))
    for i in range(SIZES["M"]):
        row = [x[i, k] + z[i, k] for k in range(SIZES["K"])]
        r = math.sqrt(sum(v * v for v in row) / SIZES["K"] + 1e-5)
        for j in range(SIZES["N"]):
            loops[i, j] = sum(row[k] / r * g[k] * w[k, j] for k in range(SIZES["K"]))
    np.testing.assert_allclose(out, loops, rtol=1e-12, atol=1e-12)


def test_reference_has_epsilon():
    # A small residual: the 1e-5 inside the sqrt changes the output visibly.
    problem = load_problem("add_rmsnorm_matmul")
    x, z, g, w = (a.astype(np.float64) for a in problem.generate(SIZES, seed=2))
    x, z = 1e-3 * x, 1e-3 * z
    (out,) = problem.reference(x, z, g, w)
    y = x + z
    with_eps = (y * g / np.sqrt(np.mean(y * y, axis=1, keepdims=True) + 1e-5)) @ w
    without_eps = (y * g / np.sqrt(np.mean(y * y, axis=1, keepdims=True))) @ w
    np.testing.assert_allclose(out, with_eps, rtol=1e-12, atol=1e-15)
    assert rel_l2(out, without_eps) > 0.1
    # x = -z: an all-zero row normalizes to zeros, not NaN.
    (zero,) = problem.reference(x, -x, g, w)
    np.testing.assert_array_equal(zero, 0.0)


def test_reference_leaves_inputs_unchanged():
    problem = load_problem("add_rmsnorm_matmul")
    inputs = problem.generate(SIZES, seed=6)
    copies = [a.copy() for a in inputs]
    problem.reference(*inputs)
    for a, b in zip(inputs, copies, strict=True):
        np.testing.assert_array_equal(a, b)


def test_paper_sizes():
    problem = load_problem("add_rmsnorm_matmul")
    assert dict(problem.workload("paper").sizes) == {"M": 4096, "N": 2048, "K": 1024}


def test_cost_model_by_hand():
    # M=2, N=3, K=4: matmul 2MNK = 48; vector 6MK = 48;
    # bytes 4(2MK + KN + K + MN) = 4(16 + 12 + 4 + 6) = 152.
    cost = load_problem("add_rmsnorm_matmul").cost.at({"M": 2, "N": 3, "K": 4})
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (48.0, 48.0, 152.0)
