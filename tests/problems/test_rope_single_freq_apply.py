"""rope_single_freq_apply: reference, derived sizes, paper sizes and cost model."""

from __future__ import annotations

import numpy as np

from accelopt.problems import load_problem

NAME = "rope_single_freq_apply"
SMALL = {"B": 2, "H": 3, "N": 5, "D": 8, "T": 30, "D2": 4}


def test_reference_as_complex_rotation():
    # (x0 + i x1) * (cos + i sin): the real part is the first half, the imaginary the second.
    problem = load_problem(NAME)
    x, cos, sin = (a.astype(np.float64) for a in problem.generate(SMALL, seed=1))
    (out,) = problem.reference(x, cos, sin)
    assert out.shape == (SMALL["D"], SMALL["T"])
    assert out.dtype == np.float64
    d2 = SMALL["D2"]
    z = (x[:d2] + 1j * x[d2:]) * (cos + 1j * sin)
    np.testing.assert_allclose(out, np.concatenate([z.real, z.imag]), rtol=1e-12, atol=1e-14)


def test_reference_against_loops():
    problem = load_problem(NAME)
    x, cos, sin = (a.astype(np.float64) for a in problem.generate(SMALL, seed=2))
    (out,) = problem.reference(x, cos, sin)
    d2 = SMALL["D2"]
    for r in range(d2):
        for t in range(SMALL["T"]):
            x0, x1, c, s = x[r, t], x[r + d2, t], cos[r, t], sin[r, t]
            assert out[r, t] == x0 * c - x1 * s
            assert out[r + d2, t] == x0 * s + x1 * c


def test_derived_sizes_are_bound_in_every_workload():
    for workload in load_problem(NAME).workloads.values():
        s = workload.sizes
        assert s["T"] == s["B"] * s["H"] * s["N"]
        assert s["D2"] * 2 == s["D"]


def test_paper_sizes():
    assert dict(load_problem(NAME).workload("paper").sizes) == {
        "B": 1,
        "H": 64,
        "N": 4096,
        "D": 128,
        "T": 64 * 4096,
        "D2": 64,
    }


def test_cost_model_by_hand():
    # B=1, H=2, N=3, D=4: vector 3BHND = 72; bytes 12BHND = 288.
    sizes = {"B": 1, "H": 2, "N": 3, "D": 4, "T": 6, "D2": 2}
    cost = load_problem(NAME).cost.at(sizes)
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (0.0, 72.0, 288.0)
