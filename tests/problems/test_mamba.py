"""mamba: the selective scan reference against a direct loop, generator, sizes and cost model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelopt.problems import load_problem

SMALL = {"M": 9, "C": 4, "S": 3}


def scan_by_loops(delta, u, a, b, c) -> np.ndarray:
    channels, steps = delta.shape
    states = a.shape[1]
    out = np.zeros((channels, steps))
    for ch in range(channels):
        h = [0.0] * states
        for i in range(steps):
            for s in range(states):
                decay = math.exp(delta[ch, i] * a[ch, s])
                h[s] = decay * h[s] + delta[ch, i] * b[s, i] * u[ch, i]
            out[ch, i] = sum(c[s, i] * h[s] for s in range(states))
    return out


# 300 steps cross the reference's chunk boundary (256 steps).
@pytest.mark.parametrize("sizes", [SMALL, {"M": 300, "C": 3, "S": 4}])
def test_reference_against_loops(sizes):
    problem = load_problem("mamba")
    inputs = [a.astype(np.float64) for a in problem.generate(sizes, seed=1)]
    (out,) = problem.reference(*inputs)
    assert out.shape == (sizes["C"], sizes["M"])
    assert out.dtype == np.float64
    assert out.flags.c_contiguous
    np.testing.assert_allclose(out, scan_by_loops(*inputs), rtol=1e-11, atol=1e-16)


def test_state_carries_over_steps():
    # With a = 0 the decay is 1 and h is the running sum of delta*b*u.
    problem = load_problem("mamba")
    delta, u, a, b, c = (x.astype(np.float64) for x in problem.generate(SMALL, seed=2))
    (out,) = problem.reference(delta, u, np.zeros_like(a), b, c)
    h = np.cumsum(delta[:, :, None] * b.T[None] * u[:, :, None], axis=1)  # [C, M, S]
    np.testing.assert_allclose(out, np.einsum("cms,sm->cm", h, c), rtol=1e-12, atol=1e-18)


def test_generator_std_is_005():
    problem = load_problem("mamba")
    for x in problem.generate({"M": 512, "C": 64, "S": 16}, seed=4):
        assert abs(float(x.std()) - 0.05) < 0.005
        assert abs(float(x.mean())) < 0.01


def test_paper_sizes_and_tolerance():
    problem = load_problem("mamba")
    assert dict(problem.workload("paper").sizes) == {"M": 7168, "C": 256, "S": 16}
    assert problem.tolerance == 3e-5


def test_cost_model_by_hand():
    # M=3, C=4, S=5: vector 8MCS = 480; bytes 4(3CM + CS + 2SM) = 4(36 + 20 + 30) = 344.
    cost = load_problem("mamba").cost.at({"M": 3, "C": 4, "S": 5})
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (0.0, 480.0, 344.0)
