"""gqa_full: non-causal grouped-query attention; query head h reads key/value head h // (QH/KH)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> Arrays:
    b, n, qh, d = q.shape
    kh = k.shape[2]
    g = qh // kh
    # Heads to the front, query heads split as (kv head, group member): h = kh_index * g + member.
    qg = q.transpose(0, 2, 1, 3).reshape(b, kh, g, n, d)
    kt = k.transpose(0, 2, 3, 1)[:, :, None]  # [B, KH, 1, D, N]
    vg = v.transpose(0, 2, 1, 3)[:, :, None]  # [B, KH, 1, N, D]
    scores = np.matmul(qg, kt) / math.sqrt(d)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return (np.matmul(p, vg).reshape(b, qh, n, d),)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 4 * s["B"] * s["QH"] * s["N"] * s["N"] * s["D"]


def vector_flops(s: Sizes) -> float:
    return 5 * s["B"] * s["QH"] * s["N"] * s["N"]


def bytes_moved(s: Sizes) -> float:
    return 8 * s["B"] * s["N"] * s["D"] * (s["QH"] + s["KH"])


PROBLEM = Problem(
    name="gqa_full",
    description=(
        "Non-causal grouped-query attention: q[B, N, QH, D], k and v [B, N, KH, D] (token-major, "
        "heads interleaved) give out[B, QH, N, D] (head-major) = softmax(q k^T / sqrt(D)) v over "
        "the N keys, query head h using key/value head h // (QH / KH); all float32, row-major."
    ),
    params=("B", "N", "QH", "KH", "D"),
    inputs=(
        TensorSpec("q", ("B", "N", "QH", "D")),
        TensorSpec("k", ("B", "N", "KH", "D")),
        TensorSpec("v", ("B", "N", "KH", "D")),
    ),
    outputs=(TensorSpec("out", ("B", "QH", "N", "D")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"B": 1, "N": 4096, "QH": 16, "KH": 8, "D": 128}),
        "cpu": Workload("cpu", {"B": 1, "N": 512, "QH": 8, "KH": 4, "D": 128}),
        "small": Workload("small", {"B": 5, "N": 24, "QH": 8, "KH": 4, "D": 16}),
        "tiny": Workload("tiny", {"B": 2, "N": 72, "QH": 6, "KH": 3, "D": 40}),
    },
    directory=Path(__file__).parent,
)
