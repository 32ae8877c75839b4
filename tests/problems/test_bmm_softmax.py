"""bmm_softmax: reference, paper sizes and cost model."""

from __future__ import annotations

import math

import numpy as np

from accelopt.problems import load_problem

SMALL = {"B": 3, "M": 5, "N": 7, "K": 6}


def test_reference_against_logsumexp():
    problem = load_problem("bmm_softmax")
    lhs, rhs = (a.astype(np.float64) for a in problem.generate(SMALL, seed=1))
    (out,) = problem.reference(lhs, rhs)
    assert out.shape == (SMALL["B"], SMALL["M"], SMALL["N"])
    assert out.dtype == np.float64
    scores = np.einsum("bmk,bkn->bmn", lhs, rhs)
    lse = np.logaddexp.reduce(scores, axis=-1, keepdims=True)
    np.testing.assert_allclose(out, np.exp(scores - lse), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=1e-12)


def test_reference_against_loops():
    problem = load_problem("bmm_softmax")
    lhs, rhs = (a.astype(np.float64) for a in problem.generate(SMALL, seed=2))
    (out,) = problem.reference(lhs, rhs)
    for b in range(SMALL["B"]):
        for i in range(SMALL["M"]):
            row = [
                sum(lhs[b, i, k] * rhs[b, k, j] for k in range(SMALL["K"]))
                for j in range(SMALL["N"])
            ]
            total = sum(math.exp(s) for s in row)
            np.testing.assert_allclose(out[b, i], [math.exp(s) / total for s in row], rtol=1e-12)


def test_reference_subtracts_the_max():
    # Scores in the thousands overflow exp unless the row max is subtracted first.
    problem = load_problem("bmm_softmax")
    lhs, rhs = problem.generate(SMALL, seed=3)
    (out,) = problem.reference(lhs * 1000, rhs)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=1e-5)


def test_paper_sizes():
    assert dict(load_problem("bmm_softmax").workload("paper").sizes) == {
        "B": 16,
        "M": 4096,
        "K": 64,
        "N": 4096,
    }


def test_cost_model_by_hand():
    # B=2, M=3, N=4, K=5: matmul 2BMNK = 240; vector 5BMN = 120;
    # bytes 4(BMN + BNK + BMK) = 4(24 + 40 + 30) = 376.
    cost = load_problem("bmm_softmax").cost.at({"B": 2, "M": 3, "N": 4, "K": 5})
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (240.0, 120.0, 376.0)
