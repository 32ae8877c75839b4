"""matmul_add_rmsnorm: y = x @ w + z, then out = y * g / sqrt(mean(y^2, axis=1) + 1e-5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload

EPS = 1e-5


def reference(x: np.ndarray, w: np.ndarray, z: np.ndarray, g: np.ndarray) -> Arrays:
    y = x @ w
    y += z
    inv_rms = 1 / np.sqrt(np.mean(y * y, axis=1, keepdims=True) + EPS)
    return (y * inv_rms * g,)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 2 * s["M"] * s["N"] * s["K"]


def vector_flops(s: Sizes) -> float:
    return 6 * s["M"] * s["N"]


def bytes_moved(s: Sizes) -> float:
    return 4 * (s["M"] * s["K"] + s["N"] * s["K"] + 2 * s["M"] * s["N"] + s["N"])


PROBLEM = Problem(
    name="matmul_add_rmsnorm",
    description=(
        "y = x[M, K] @ w[K, N] + z[M, N] (a residual add), then RMS-normalize each row of y over "
        "N with epsilon 1e-5 inside the sqrt and scale by the gain g[N]: out[M, N] = "
        "y * g / sqrt(mean(y^2) + 1e-5); all float32 and row-major."
    ),
    params=("M", "N", "K"),
    inputs=(
        TensorSpec("x", ("M", "K")),
        TensorSpec("w", ("K", "N")),
        TensorSpec("z", ("M", "N")),
        TensorSpec("g", ("N",)),
    ),
    outputs=(TensorSpec("out", ("M", "N")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"M": 4096, "N": 2048, "K": 2048}),
        "cpu": Workload("cpu", {"M": 1280, "N": 640, "K": 640}),
        "small": Workload("small", {"M": 96, "N": 48, "K": 32}),
        "tiny": Workload("tiny", {"M": 40, "N": 300, "K": 72}),
    },
    directory=Path(__file__).parent,
)
