"""matmul_add_rmsnorm: reference against independent formulations, paper sizes, cost."""

from __future__ import annotations

import math

import numpy as np

from accelopt.problems import load_problem

SIZES = {"M": 5, "N": 7, "K": 6}


def rel_l2(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def test_reference_against_einsum_and_loops():
    problem = load_problem("matmul_add_rmsnorm")
    x, w, z, g = (a.astype(np.float64) for a in problem.generate(SIZES, seed=1))
    (out,) = problem.reference(x, w, z, g)
    assert out.shape == (SIZES["M"], SIZES["N"])
    assert out.dtype == np.float64
    # The RMS from the vector norm, the gain applied first.
    y = np.einsum("mk,kn->mn", x, w) + z
    rms = np.sqrt((np.linalg.norm(y, axis=1) / math.sqrt(SIZES["N"])) ** 2 + 1e-5)
    np.testing.assert_allclose(out, (y * g) / rms[:, None], rtol=1e-12, atol=1e-12)
    # Explicit loops.
    loops = np.zeros((SIZES["M"], SIZES["N"]))
    for i in range(SIZES["M"]):
        row = [
            sum(x[i, k] * w[k, j] for k in range(SIZES["K"])) + z[i, j] for j in range(SIZES["N"])
        ]
        r = math.sqrt(sum(v * v for v in row) / SIZES["N"] + 1e-5)
        for j in range(SIZES["N"]):
            loops[i, j] = row[j] / r * g[j]
    np.testing.assert_allclose(out, loops, rtol=1e-12, atol=1e-12)


def test_reference_has_epsilon():
    # With x = 0 and a small residual, the 1e-5 inside the sqrt changes the output visibly.
    problem = load_problem("matmul_add_rmsnorm")
    x, w, z, g = (a.astype(np.float64) for a in problem.generate(SIZES, seed=2))
    x = np.zeros_like(x)
    z = 1e-3 * z
    (out,) = problem.reference(x, w, z, g)
    with_eps = z * g / np.sqrt(np.mean(z * z, axis=1, keepdims=True) + 1e-5)
    without_eps = z * g / np.sqrt(np.mean(z * z, axis=1, keepdims=True))
    np.testing.assert_allclose(out, with_eps, rtol=1e-12)
    assert rel_l2(out, without_eps) > 0.1
    # An all-zero row normalizes to zeros, not NaN.
    (zero,) = problem.reference(x, w, np.zeros_like(z), g)
    np.testing.assert_array_equal(zero, 0.0)


def test_paper_sizes():
    problem = load_problem("matmul_add_rmsnorm")
    assert dict(problem.workload("paper").sizes) == {"M": 4096, "N": 2048, "K": 2048}


def test_cost_model_by_hand():
    # M=2, N=3, K=4: matmul 2MNK = 48; vector 6MN = 36;
    # bytes 4(MK + NK + 2MN + N) = 4(8 + 12 + 12 + 3) = 140.
    cost = load_problem("matmul_add_rmsnorm").cost.at({"M": 2, "N": 3, "K": 4})
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (48.0, 36.0, 140.0)
