"""A user's problem: y = a * x + b with a per-column scale a and bias b."""

from pathlib import Path

import numpy as np

from accelopt.problems import CostModel, Problem, TensorSpec, Workload


def reference(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    return (x * a[None, :] + b[None, :],)


PROBLEM = Problem(
    name="axpy_rows",
    description="Scale each column of x by a and add b.",
    params=("M", "N"),
    inputs=(TensorSpec("x", ("M", "N")), TensorSpec("a", ("N",)), TensorSpec("b", ("N",))),
    outputs=(TensorSpec("y", ("M", "N")),),
    reference=reference,
    cost=CostModel(
        matmul_flops=lambda s: 0,
        vector_flops=lambda s: 2 * s["M"] * s["N"],
        bytes=lambda s: 4 * (2 * s["M"] * s["N"] + 2 * s["N"]),
    ),
    workloads={
        "cpu": Workload("cpu", {"M": 512, "N": 1024}),
        "tiny": Workload("tiny", {"M": 8, "N": 16}),
    },
    directory=Path(__file__).parent,
)
