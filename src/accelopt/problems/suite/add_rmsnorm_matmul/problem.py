"""add_rmsnorm_matmul: y = x + z, then out = (y / sqrt(mean(y^2, axis=1) + 1e-5) * g) @ w."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload

EPS = 1e-5


def reference(x: np.ndarray, z: np.ndarray, g: np.ndarray, w: np.ndarray) -> Arrays:
    y = x + z
    inv_rms = 1 / np.sqrt(np.mean(y * y, axis=1, keepdims=True) + EPS)
    y *= inv_rms
    y *= g
    return (y @ w,)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 2 * s["M"] * s["N"] * s["K"]


def vector_flops(s: Sizes) -> float:
    return 6 * s["M"] * s["K"]


def bytes_moved(s: Sizes) -> float:
    return 4 * (2 * s["M"] * s["K"] + s["K"] * s["N"] + s["K"] + s["M"] * s["N"])


PROBLEM = Problem(
    name="add_rmsnorm_matmul",
    description=(
        "y = x[M, K] + z[M, K] (a residual add), RMS-normalize each row of y over K with epsilon "
        "1e-5 inside the sqrt, scale by the gain g[K], then multiply by w[K, N]: out[M, N] = "
        "(y / sqrt(mean(y^2) + 1e-5) * g) @ w; all float32 and row-major."
    ),
    params=("M", "N", "K"),
    inputs=(
        TensorSpec("x", ("M", "K")),
        TensorSpec("z", ("M", "K")),
        TensorSpec("g", ("K",)),
        TensorSpec("w", ("K", "N")),
    ),
    outputs=(TensorSpec("out", ("M", "N")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"M": 4096, "N": 2048, "K": 1024}),
        "cpu": Workload("cpu", {"M": 1536, "N": 768, "K": 384}),
        "small": Workload("small", {"M": 96, "N": 48, "K": 32}),
        "tiny": Workload("tiny", {"M": 36, "N": 100, "K": 300}),
    },
    directory=Path(__file__).parent,
)
