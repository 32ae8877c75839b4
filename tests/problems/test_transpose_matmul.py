"""transpose_matmul: reference against independent formulations, paper sizes, cost."""

from __future__ import annotations

import numpy as np

from accelopt.problems import load_problem

SIZES = {"M": 5, "N": 7, "K": 6}


def test_reference_against_einsum_and_loops():
    problem = load_problem("transpose_matmul")
    lhs_t, rhs = (a.astype(np.float64) for a in problem.generate(SIZES, seed=1))
    assert lhs_t.shape == (SIZES["K"], SIZES["M"])
    (out,) = problem.reference(lhs_t, rhs)
    assert out.shape == (SIZES["M"], SIZES["N"])
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, np.einsum("km,kn->mn", lhs_t, rhs), rtol=1e-12, atol=1e-12)
    # Explicit loops: lhs_t[k, i] is element (i, k) of the left matrix.
    loops = np.zeros((SIZES["M"], SIZES["N"]))
    for i in range(SIZES["M"]):
        for j in range(SIZES["N"]):
            loops[i, j] = sum(lhs_t[k, i] * rhs[k, j] for k in range(SIZES["K"]))
    np.testing.assert_allclose(out, loops, rtol=1e-12, atol=1e-12)


def test_paper_sizes():
    problem = load_problem("transpose_matmul")
    assert dict(problem.workload("paper").sizes) == {"M": 4096, "N": 10944, "K": 2048}


def test_cost_model_by_hand():
    # M=2, N=3, K=4: matmul 2MNK = 48; no vector work; bytes 4(MN + NK + MK) = 4(6 + 12 + 8) = 104.
    cost = load_problem("transpose_matmul").cost.at({"M": 2, "N": 3, "K": 4})
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (48.0, 0.0, 104.0)
