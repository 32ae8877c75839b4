"""rope_single_freq_apply: rotate the two halves of x by given cos/sin, column by column."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload


def reference(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> Arrays:
    half = x.shape[0] // 2
    x0, x1 = x[:half], x[half:]
    return (np.concatenate([x0 * cos - x1 * sin, x0 * sin + x1 * cos], axis=0),)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 0


def vector_flops(s: Sizes) -> float:
    return 3 * s["B"] * s["H"] * s["N"] * s["D"]


def bytes_moved(s: Sizes) -> float:
    return 12 * s["B"] * s["H"] * s["N"] * s["D"]


def _sizes(b: int, h: int, n: int, d: int) -> dict[str, int]:
    """Bind the derived parameters: T = B * H * N columns, D2 = D / 2 rows per half."""
    return {"B": b, "H": h, "N": n, "D": d, "T": b * h * n, "D2": d // 2}


PROBLEM = Problem(
    name="rope_single_freq_apply",
    description=(
        "Apply rotary embeddings with precomputed tables: x[D, T] (head dim on rows, the "
        "T = B*H*N tokens of all heads on columns), cos and sin [D2, T] with D2 = D/2; with x0, x1 "
        "the first and last D2 rows of x, out[D, T] = [x0*cos - x1*sin ; x0*sin + x1*cos]. "
        "T and D2 are derived size parameters, all float32 and row-major; memory-bound."
    ),
    params=("B", "H", "N", "D", "T", "D2"),
    inputs=(
        TensorSpec("x", ("D", "T")),
        TensorSpec("cos", ("D2", "T")),
        TensorSpec("sin", ("D2", "T")),
    ),
    outputs=(TensorSpec("out", ("D", "T")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", _sizes(1, 64, 4096, 128)),
        "cpu": Workload("cpu", _sizes(1, 32, 2048, 128)),
        "small": Workload("small", _sizes(4, 6, 10, 16)),
        "tiny": Workload("tiny", _sizes(2, 5, 10, 12)),
    },
    directory=Path(__file__).parent,
)
