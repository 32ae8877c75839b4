"""matmul: out = lhs @ rhs on row-major float32 matrices."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload


def reference(lhs: np.ndarray, rhs: np.ndarray) -> Arrays:
    return (lhs @ rhs,)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 2 * s["M"] * s["N"] * s["K"]


def vector_flops(s: Sizes) -> float:
    return 0


def bytes_moved(s: Sizes) -> float:
    return 4 * (s["M"] * s["N"] + s["N"] * s["K"] + s["M"] * s["K"])


PROBLEM = Problem(
    name="matmul",
    description=(
        "Dense matrix multiply out[M, N] = lhs[M, K] @ rhs[K, N], all float32 and row-major "
        "(rhs is K-major, not transposed); compute-bound."
    ),
    params=("M", "N", "K"),
    inputs=(TensorSpec("lhs", ("M", "K")), TensorSpec("rhs", ("K", "N"))),
    outputs=(TensorSpec("out", ("M", "N")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"M": 4096, "N": 12288, "K": 5120}),
        "cpu": Workload("cpu", {"M": 512, "N": 1536, "K": 640}),
        "small": Workload("small", {"M": 64, "N": 192, "K": 80}),
        "tiny": Workload("tiny", {"M": 72, "N": 100, "K": 40}),
    },
    directory=Path(__file__).parent,
)
