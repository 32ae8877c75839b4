"""bmm_softmax: out[b] = softmax(lhs[b] @ rhs[b]) over the last axis, for each batch b."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload


def reference(lhs: np.ndarray, rhs: np.ndarray) -> Arrays:
    scores = np.matmul(lhs, rhs)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True),)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 2 * s["B"] * s["M"] * s["N"] * s["K"]


def vector_flops(s: Sizes) -> float:
    return 5 * s["B"] * s["M"] * s["N"]


def bytes_moved(s: Sizes) -> float:
    return 4 * (s["B"] * s["M"] * s["N"] + s["B"] * s["N"] * s["K"] + s["B"] * s["M"] * s["K"])


PROBLEM = Problem(
    name="bmm_softmax",
    description=(
        "Batched matmul then row softmax: s = lhs[B, M, K] @ rhs[B, K, N] per batch, "
        "out[B, M, N] = exp(s - max_n s) / sum_n exp(s - max_n s) over the last axis (N); all "
        "float32 and row-major (rhs is K-major, not transposed)."
    ),
    params=("B", "M", "N", "K"),
    inputs=(TensorSpec("lhs", ("B", "M", "K")), TensorSpec("rhs", ("B", "K", "N"))),
    outputs=(TensorSpec("out", ("B", "M", "N")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"B": 16, "M": 4096, "N": 4096, "K": 64}),
        "cpu": Workload("cpu", {"B": 5, "M": 1280, "N": 1280, "K": 64}),
        "small": Workload("small", {"B": 4, "M": 24, "N": 40, "K": 16}),
        "tiny": Workload("tiny", {"B": 3, "M": 72, "N": 100, "K": 24}),
    },
    directory=Path(__file__).parent,
)
