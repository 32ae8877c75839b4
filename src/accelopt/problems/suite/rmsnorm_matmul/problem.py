"""rmsnorm_matmul: out = (x / sqrt(mean(x^2, axis=1))) @ w, no epsilon and no gain."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload


def reference(x: np.ndarray, w: np.ndarray) -> Arrays:
    rms = np.sqrt(np.mean(x * x, axis=1, keepdims=True))
    return ((x / rms) @ w,)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 2 * s["M"] * s["N"] * s["K"]


def vector_flops(s: Sizes) -> float:
    return 4 * s["M"] * s["K"]


def bytes_moved(s: Sizes) -> float:
    return 4 * (s["M"] * s["K"] + s["K"] * s["N"] + s["M"] * s["N"])


PROBLEM = Problem(
    name="rmsnorm_matmul",
    description=(
        "RMS-normalize each row of x[M, K] (divide by sqrt(mean(x^2)) over K; no epsilon, no "
        "gain), then multiply by w[K, N] to give out[M, N]; all float32 and row-major."
    ),
    params=("M", "N", "K"),
    inputs=(TensorSpec("x", ("M", "K")), TensorSpec("w", ("K", "N"))),
    outputs=(TensorSpec("out", ("M", "N")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"M": 4096, "N": 2048, "K": 1024}),
        "cpu": Workload("cpu", {"M": 1536, "N": 768, "K": 384}),
        "small": Workload("small", {"M": 96, "N": 48, "K": 32}),
        "tiny": Workload("tiny", {"M": 40, "N": 72, "K": 300}),
    },
    directory=Path(__file__).parent,
)
