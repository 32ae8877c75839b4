"""transpose_matmul: out = lhs_t.T @ rhs, the left operand stored transposed (K-major)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload


def reference(lhs_t: np.ndarray, rhs: np.ndarray) -> Arrays:
    return (lhs_t.T @ rhs,)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 2 * s["M"] * s["N"] * s["K"]


def vector_flops(s: Sizes) -> float:
    return 0


def bytes_moved(s: Sizes) -> float:
    return 4 * (s["M"] * s["N"] + s["N"] * s["K"] + s["M"] * s["K"])


PROBLEM = Problem(
    name="transpose_matmul",
    description=(
        "Matrix multiply with a transposed left operand, out[M, N] = lhs_t[K, M]^T @ rhs[K, N]: "
        "both inputs are stored K-major (row k of lhs_t holds column k of the M x K left matrix); "
        "all float32 and row-major; compute-bound."
    ),
    params=("M", "N", "K"),
    inputs=(TensorSpec("lhs_t", ("K", "M")), TensorSpec("rhs", ("K", "N"))),
    outputs=(TensorSpec("out", ("M", "N")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"M": 4096, "N": 10944, "K": 2048}),
        "cpu": Workload("cpu", {"M": 768, "N": 2048, "K": 384}),
        "small": Workload("small", {"M": 64, "N": 176, "K": 32}),
        "tiny": Workload("tiny", {"M": 72, "N": 100, "K": 40}),
    },
    directory=Path(__file__).parent,
)
