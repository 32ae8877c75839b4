"""lora: out = x @ w + (x @ a) @ b, a dense layer plus its rank-R low-rank adapter."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload


def reference(x: np.ndarray, w: np.ndarray, a: np.ndarray, b: np.ndarray) -> Arrays:
    out = x @ w
    out += (x @ a) @ b
    return (out,)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return (
        2 * s["M"] * s["N"] * s["K"] + 2 * s["M"] * s["K"] * s["R"] + 2 * s["M"] * s["N"] * s["R"]
    )


def vector_flops(s: Sizes) -> float:
    return s["M"] * s["N"]


def bytes_moved(s: Sizes) -> float:
    return 4 * (
        s["M"] * s["K"] + s["K"] * s["N"] + s["K"] * s["R"] + s["R"] * s["N"] + s["M"] * s["N"]
    )


PROBLEM = Problem(
    name="lora",
    description=(
        "LoRA layer out[M, N] = x[M, K] @ w[K, N] + (x @ a[K, R]) @ b[R, N], a dense matmul plus "
        "a rank-R adapter (R much smaller than K and N); all float32 and row-major (weights not "
        "transposed); compute-bound."
    ),
    params=("M", "N", "K", "R"),
    inputs=(
        TensorSpec("x", ("M", "K")),
        TensorSpec("w", ("K", "N")),
        TensorSpec("a", ("K", "R")),
        TensorSpec("b", ("R", "N")),
    ),
    outputs=(TensorSpec("out", ("M", "N")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"M": 4096, "N": 12288, "K": 5120, "R": 128}),
        "cpu": Workload("cpu", {"M": 512, "N": 1536, "K": 640, "R": 16}),
        "small": Workload("small", {"M": 64, "N": 192, "K": 80, "R": 16}),
        "tiny": Workload("tiny", {"M": 72, "N": 100, "K": 40, "R": 12}),
    },
    directory=Path(__file__).parent,
)
