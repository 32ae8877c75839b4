"""silu: y = x / (1 + exp(-x)), elementwise over a row-major [M, N] matrix."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload


def reference(x: np.ndarray) -> Arrays:
    with np.errstate(over="ignore"):  # exp(-x) may overflow to inf for x << 0; x / inf is exact
        return (x / (1 + np.exp(-x)),)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 0


def vector_flops(s: Sizes) -> float:
    return 3 * s["M"] * s["N"]


def bytes_moved(s: Sizes) -> float:
    return 8 * s["M"] * s["N"]


PROBLEM = Problem(
    name="silu",
    description=(
        "SiLU activation y = x / (1 + exp(-x)), applied elementwise to a float32 row-major "
        "x[M, N], writing y[M, N]; memory-bound."
    ),
    params=("M", "N"),
    inputs=(TensorSpec("x", ("M", "N")),),
    outputs=(TensorSpec("y", ("M", "N")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"M": 4096, "N": 7168}),
        "cpu": Workload("cpu", {"M": 2048, "N": 3584}),
        "small": Workload("small", {"M": 64, "N": 112}),
        "tiny": Workload("tiny", {"M": 24, "N": 100}),
    },
    directory=Path(__file__).parent,
)
