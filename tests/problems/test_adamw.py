"""adamw: reference against the textbook update, generator, paper sizes and cost model."""

from __future__ import annotations

import numpy as np

from accelopt.problems import load_problem

SMALL = {"M": 5, "N": 7}


def adamw_textbook(theta, g, m, v, t=1, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.01):
    """Decoupled weight decay, moment updates, then the bias-corrected Adam step."""
    theta = theta - lr * wd * theta
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g**2
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    return theta - lr * m_hat / (np.sqrt(v_hat) + eps)


def test_reference_against_textbook_update():
    problem = load_problem("adamw")
    theta, g, m, v = (a.astype(np.float64) for a in problem.generate(SMALL, seed=1))
    (out,) = problem.reference(theta, g, m, v)
    assert out.shape == (SMALL["M"], SMALL["N"])
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, adamw_textbook(theta, g, m, v), rtol=1e-12, atol=1e-14)


def test_generator_second_moment_is_non_negative():
    problem = load_problem("adamw")
    theta, g, m, v = problem.generate({"M": 64, "N": 48}, seed=3)
    assert np.all(v >= 0)
    assert np.all(v != 0)
    # The other inputs are N(0, 1): both signs.
    for a in (theta, g, m):
        assert a.min() < 0 < a.max()
        assert abs(float(a.std()) - 1.0) < 0.1


def test_paper_sizes():
    assert dict(load_problem("adamw").workload("paper").sizes) == {"M": 10944, "N": 2048}


def test_cost_model_by_hand():
    # M=2, N=3: vector 7MN = 42; bytes 20MN = 120.
    cost = load_problem("adamw").cost.at({"M": 2, "N": 3})
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (0.0, 42.0, 120.0)
