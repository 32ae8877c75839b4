"""swiglu: reference against independent formulations, paper sizes, cost model."""

from __future__ import annotations

import math

import numpy as np

from accelopt.problems import load_problem

SIZES = {"M": 5, "N": 7, "K": 6}


def test_reference_against_einsum_and_loops():
    problem = load_problem("swiglu")
    x, w_up, w_down, w_gate = (a.astype(np.float64) for a in problem.generate(SIZES, seed=1))
    (out,) = problem.reference(x, w_up, w_down, w_gate)
    assert out.shape == (SIZES["M"], SIZES["K"])
    assert out.dtype == np.float64
    # silu through tanh, and the matmuls as einsums.
    gate = np.einsum("mk,kn->mn", x, w_gate)
    hidden = gate * 0.5 * (1.0 + np.tanh(gate / 2.0)) * np.einsum("mk,kn->mn", x, w_up)
    np.testing.assert_allclose(out, np.einsum("mn,nk->mk", hidden, w_down), rtol=1e-12, atol=1e-12)
    # Explicit loops, one output element at a time.
    loops = np.zeros((SIZES["M"], SIZES["K"]))
    for i in range(SIZES["M"]):
        h = []
        for j in range(SIZES["N"]):
            g = sum(x[i, k] * w_gate[k, j] for k in range(SIZES["K"]))
            u = sum(x[i, k] * w_up[k, j] for k in range(SIZES["K"]))
            h.append(g / (1.0 + math.exp(-g)) * u)
        for c in range(SIZES["K"]):
            loops[i, c] = sum(h[j] * w_down[j, c] for j in range(SIZES["N"]))
    np.testing.assert_allclose(out, loops, rtol=1e-12, atol=1e-12)


def test_reference_extremes_are_finite():
    # A very negative gate overflows exp(-t) in float32; silu must still give 0, not NaN.
    problem = load_problem("swiglu")
    x = np.full((1, 2), 100.0, dtype=np.float32)
    w_up = np.ones((2, 3), dtype=np.float32)
    w_down = np.ones((3, 2), dtype=np.float32)
    w_gate = np.array([[-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0]], dtype=np.float32)
    (out,) = problem.reference(x, w_up, w_down, w_gate)
    # Hidden = [silu(-200) * 200, 0, silu(200) * 200] = [0, 0, 40000].
    np.testing.assert_allclose(out, [[40000.0, 40000.0]], rtol=1e-6)


def test_paper_sizes():
    problem = load_problem("swiglu")
    assert dict(problem.workload("paper").sizes) == {"M": 4096, "N": 3072, "K": 1024}


def test_cost_model_by_hand():
    # M=2, N=3, K=4: matmul 6MNK = 144; vector 5MN = 30; bytes 4(2MK + 3KN) = 4(16 + 36) = 208.
    cost = load_problem("swiglu").cost.at({"M": 2, "N": 3, "K": 4})
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (144.0, 30.0, 208.0)
