"""lora: reference against independent formulations, paper sizes, cost model."""

from __future__ import annotations

import numpy as np

from accelopt.problems import load_problem

SIZES = {"M": 5, "N": 7, "K": 6, "R": 3}


def test_reference_against_einsum_and_loops():
    problem = load_problem("lora")
    x, w, a, b = (t.astype(np.float64) for t in problem.generate(SIZES, seed=1))
    (out,) = problem.reference(x, w, a, b)
    assert out.shape == (SIZES["M"], SIZES["N"])
    assert out.dtype == np.float64
    # Merge the adapter into the weights first: x @ (w + a @ b).
    merged = w + np.einsum("kr,rn->kn", a, b)
    np.testing.assert_allclose(out, np.einsum("mk,kn->mn", x, merged), rtol=1e-12, atol=1e-12)
    # Explicit loops.
    loops = np.zeros((SIZES["M"], SIZES["N"]))
    for i in range(SIZES["M"]):
        xa = [sum(x[i, k] * a[k, r] for k in range(SIZES["K"])) for r in range(SIZES["R"])]
        for j in range(SIZES["N"]):
            dense = sum(x[i, k] * w[k, j] for k in range(SIZES["K"]))
            loops[i, j] = dense + sum(xa[r] * b[r, j] for r in range(SIZES["R"]))
    np.testing.assert_allclose(out, loops, rtol=1e-12, atol=1e-12)


def test_paper_sizes():
    problem = load_problem("lora")
    assert dict(problem.workload("paper").sizes) == {"M": 4096, "N": 12288, "K": 5120, "R": 128}


def test_cost_model_by_hand():
    # M=2, N=3, K=4, R=5: matmul 2MNK + 2MKR + 2MNR = 48 + 80 + 60 = 188; vector MN = 6;
    # bytes 4(MK + KN + KR + RN + MN) = 4(8 + 12 + 20 + 15 + 6) = 244.
    cost = load_problem("lora").cost.at({"M": 2, "N": 3, "K": 4, "R": 5})
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (188.0, 6.0, 244.0)
