"""gqa_full: reference, head grouping, paper sizes and cost model."""

from __future__ import annotations

import math

import numpy as np

from accelopt.problems import load_problem

SMALL = {"B": 2, "N": 7, "QH": 6, "KH": 2, "D": 5}


def attention_by_heads(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Loop over batches and query heads with k and v repeated to QH heads; logsumexp softmax."""
    b_size, n, qh, d = q.shape
    group = qh // k.shape[2]
    k_rep, v_rep = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    out = np.zeros((b_size, qh, n, d))
    for b in range(b_size):
        for h in range(qh):
            scores = q[b, :, h, :] @ k_rep[b, :, h, :].T / math.sqrt(d)
            p = np.exp(scores - np.logaddexp.reduce(scores, axis=1, keepdims=True))
            out[b, h] = p @ v_rep[b, :, h, :]
    return out


def test_reference_against_heads_loop():
    problem = load_problem("gqa_full")
    q, k, v = (a.astype(np.float64) for a in problem.generate(SMALL, seed=1))
    (out,) = problem.reference(q, k, v)
    assert out.shape == (SMALL["B"], SMALL["QH"], SMALL["N"], SMALL["D"])
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, attention_by_heads(q, k, v), rtol=1e-12, atol=1e-14)


def test_reference_against_scalar_loops_for_one_row():
    problem = load_problem("gqa_full")
    q, k, v = (a.astype(np.float64) for a in problem.generate(SMALL, seed=2))
    (out,) = problem.reference(q, k, v)
    b, h, i, d = 1, 5, 3, SMALL["D"]
    kvh = h // (SMALL["QH"] // SMALL["KH"])  # = 1
    scores = [
        sum(q[b, i, h, x] * k[b, j, kvh, x] for x in range(d)) / math.sqrt(d)
        for j in range(SMALL["N"])
    ]
    weights = [math.exp(s) for s in scores]
    expected = [
        sum(w * v[b, j, kvh, x] for j, w in enumerate(weights)) / sum(weights) for x in range(d)
    ]
    np.testing.assert_allclose(out[b, h, i], expected, rtol=1e-12)


def test_query_head_reads_kv_head_h_div_group():
    # Changing key/value head 0 changes exactly query heads 0 .. QH/KH - 1.
    problem = load_problem("gqa_full")
    q, k, v = (a.astype(np.float64) for a in problem.generate(SMALL, seed=3))
    (before,) = problem.reference(q, k, v)
    k2, v2 = k.copy(), v.copy()
    k2[:, :, 0] += 1.0
    v2[:, :, 0] *= 2.0
    (after,) = problem.reference(q, k2, v2)
    changed = [not np.allclose(before[:, h], after[:, h]) for h in range(SMALL["QH"])]
    assert changed == [True, True, True, False, False, False]


def test_paper_sizes():
    assert dict(load_problem("gqa_full").workload("paper").sizes) == {
        "B": 1,
        "N": 4096,
        "QH": 16,
        "KH": 8,
        "D": 128,
    }


def test_workloads_keep_the_group_size():
    for workload in load_problem("gqa_full").workloads.values():
        assert workload.sizes["QH"] == 2 * workload.sizes["KH"]


def test_cost_model_by_hand():
    # B=2, N=3, QH=4, KH=2, D=5: matmul 4*B*QH*N^2*D = 4*2*4*9*5 = 1440;
    # vector 5*B*QH*N^2 = 360; bytes 8*B*N*D*(QH + KH) = 8*2*3*5*6 = 1440.
    cost = load_problem("gqa_full").cost.at({"B": 2, "N": 3, "QH": 4, "KH": 2, "D": 5})
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (1440.0, 360.0, 1440.0)
