"""bmm: reference, paper sizes and cost model."""

from __future__ import annotations

import numpy as np

from accelopt.problems import load_problem

SMALL = {"B": 3, "M": 5, "N": 7, "K": 6}


def test_reference_against_loops_and_einsum():
    problem = load_problem("bmm")
    lhs, rhs = (a.astype(np.float64) for a in problem.generate(SMALL, seed=1))
    (out,) = problem.reference(lhs, rhs)
    assert out.shape == (SMALL["B"], SMALL["M"], SMALL["N"])
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, np.einsum("bmk,bkn->bmn", lhs, rhs), rtol=1e-12, atol=1e-12)
    loops = np.zeros_like(out)
    for b in range(SMALL["B"]):
        for i in range(SMALL["M"]):
            for j in range(SMALL["N"]):
                loops[b, i, j] = sum(lhs[b, i, k] * rhs[b, k, j] for k in range(SMALL["K"]))
    np.testing.assert_allclose(out, loops, rtol=1e-12, atol=1e-12)


def test_paper_sizes():
    assert dict(load_problem("bmm").workload("paper").sizes) == {
        "B": 16,
        "M": 4096,
        "K": 64,
        "N": 4096,
    }


def test_cost_model_by_hand():
    # B=2, M=3, N=4, K=5: matmul 2BMNK = 240; bytes 4(BMN + BNK + BMK) = 4(24 + 40 + 30) = 376.
    cost = load_problem("bmm").cost.at({"B": 2, "M": 3, "N": 4, "K": 5})
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (240.0, 0.0, 376.0)
