"""swiglu: out = (silu(x @ w_gate) * (x @ w_up)) @ w_down, the gated MLP of a transformer."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload


def reference(x: np.ndarray, w_up: np.ndarray, w_down: np.ndarray, w_gate: np.ndarray) -> Arrays:
    gate = x @ w_gate
    with np.errstate(over="ignore"):  # exp(-t) may overflow to inf for t << 0; t / inf is exact
        hidden = gate / (1 + np.exp(-gate))
    hidden *= x @ w_up
    return (hidden @ w_down,)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 6 * s["M"] * s["N"] * s["K"]


def vector_flops(s: Sizes) -> float:
    return 5 * s["M"] * s["N"]


def bytes_moved(s: Sizes) -> float:
    return 4 * (2 * s["M"] * s["K"] + 3 * s["K"] * s["N"])


PROBLEM = Problem(
    name="swiglu",
    description=(
        "SwiGLU MLP out[M, K] = (silu(x @ w_gate) * (x @ w_up)) @ w_down with silu(t) = "
        "t / (1 + exp(-t)), for x[M, K], w_up[K, N], w_down[N, K], w_gate[K, N]; all float32 and "
        "row-major (weights not transposed); the hidden [M, N] is an intermediate, not an output."
    ),
    params=("M", "N", "K"),
    inputs=(
        TensorSpec("x", ("M", "K")),
        TensorSpec("w_up", ("K", "N")),
        TensorSpec("w_down", ("N", "K")),
        TensorSpec("w_gate", ("K", "N")),
    ),
    outputs=(TensorSpec("out", ("M", "K")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"M": 4096, "N": 3072, "K": 1024}),
        "cpu": Workload("cpu", {"M": 1024, "N": 768, "K": 256}),
        "small": Workload("small", {"M": 128, "N": 96, "K": 32}),
        "tiny": Workload("tiny", {"M": 72, "N": 100, "K": 40}),
    },
    directory=Path(__file__).parent,
)
