"""adamw: one AdamW step at t = 1 (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload


def reference(theta: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray) -> Arrays:
    # Bias correction at t = 1 folded in: m_hat = m1 / 0.1, v_hat = v1 / 0.001.
    t1 = theta * (1 - 1e-5)
    m1 = 0.9 * m + 0.1 * g
    v1 = 0.999 * v + 0.001 * (g * g)
    return (t1 - 0.01 * m1 / (np.sqrt(1000 * v1) + 1e-8),)


def generate(rng: np.random.Generator, shapes: list[tuple[int, ...]]) -> Arrays:
    """theta, g, m ~ N(0, 1); the second moment v ~ |N(0, 1)|, non-negative as in training."""
    theta, g, m, v = (rng.standard_normal(s, dtype=np.float32) for s in shapes)
    return theta, g, m, np.abs(v)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 0


def vector_flops(s: Sizes) -> float:
    return 7 * s["M"] * s["N"]


def bytes_moved(s: Sizes) -> float:
    return 20 * s["M"] * s["N"]


PROBLEM = Problem(
    name="adamw",
    description=(
        "One AdamW step at t=1 on theta, g, m, v [M, N] (v >= 0), returning only the new "
        "out[M, N] = theta*(1 - 1e-5) - 0.01*m1 / (sqrt(1000*v1) + 1e-8) with "
        "m1 = 0.9*m + 0.1*g and v1 = 0.999*v + 0.001*g^2; elementwise, float32, memory-bound."
    ),
    params=("M", "N"),
    inputs=(
        TensorSpec("theta", ("M", "N")),
        TensorSpec("g", ("M", "N")),
        TensorSpec("m", ("M", "N")),
        TensorSpec("v", ("M", "N")),
    ),
    outputs=(TensorSpec("out", ("M", "N")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"M": 10944, "N": 2048}),
        "cpu": Workload("cpu", {"M": 5472, "N": 1024}),
        "small": Workload("small", {"M": 40, "N": 24}),
        "tiny": Workload("tiny", {"M": 36, "N": 100}),
    },
    directory=Path(__file__).parent,
    generator=generate,
)
