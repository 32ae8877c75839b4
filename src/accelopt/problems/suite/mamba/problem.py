"""mamba: the selective scan of a Mamba block, a recurrence over M steps per channel and state."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload

# Steps whose decay and input terms are computed in one NumPy call before the sequential part.
_CHUNK = 256


def reference(
    delta: np.ndarray, u: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray
) -> Arrays:
    steps = delta.shape[1]
    h = np.zeros(a.shape, dtype=delta.dtype)  # [C, S]
    out = np.empty(delta.shape[::-1], dtype=delta.dtype)  # [M, C], transposed at the end
    for start in range(0, steps, _CHUNK):
        chunk = slice(start, min(start + _CHUNK, steps))
        # Step-major copies, so that each step's [C, S] slice below is contiguous.
        d = np.ascontiguousarray(delta[:, chunk].T)[:, :, None]  # [L, C, 1]
        du = d * np.ascontiguousarray(u[:, chunk].T)[:, :, None]  # [L, C, 1]
        decay = np.exp(d * a)  # [L, C, S]
        states = du * np.ascontiguousarray(b[:, chunk].T)[:, None, :]  # input terms, [L, C, S]
        for step_decay, state in zip(decay, states, strict=True):
            h *= step_decay
            h += state
            state[...] = h  # the input term becomes the state after the step
        cs = np.ascontiguousarray(c[:, chunk].T)[:, :, None]  # [L, S, 1]
        out[chunk] = np.matmul(states, cs)[..., 0]
    return (np.ascontiguousarray(out.T),)


def generate(rng: np.random.Generator, shapes: list[tuple[int, ...]]) -> Arrays:
    """All inputs ~ N(0, 0.05^2), small enough that the state neither explodes nor vanishes."""
    return tuple(0.05 * rng.standard_normal(s, dtype=np.float32) for s in shapes)


# The NKIBench published cost model.
def matmul_flops(s: Sizes) -> float:
    return 0


def vector_flops(s: Sizes) -> float:
    return 8 * s["M"] * s["C"] * s["S"]


def bytes_moved(s: Sizes) -> float:
    return 4 * (3 * s["C"] * s["M"] + s["C"] * s["S"] + 2 * s["S"] * s["M"])


PROBLEM = Problem(
    name="mamba",
    description=(
        "Selective scan: delta, u [C, M], a [C, S], b, c [S, M]; per channel ch a state h[S] "
        "starts at 0 and for each step i: h[s] = exp(delta[ch,i]*a[ch,s])*h[s] + "
        "delta[ch,i]*b[s,i]*u[ch,i], then out[ch,i] = sum_s c[s,i]*h[s]. Sequential in i, "
        "independent across channels; all float32, row-major."
    ),
    params=("M", "C", "S"),
    inputs=(
        TensorSpec("delta", ("C", "M")),
        TensorSpec("u", ("C", "M")),
        TensorSpec("a", ("C", "S")),
        TensorSpec("b", ("S", "M")),
        TensorSpec("c", ("S", "M")),
    ),
    outputs=(TensorSpec("out", ("C", "M")),),
    reference=reference,
    cost=CostModel(matmul_flops=matmul_flops, vector_flops=vector_flops, bytes=bytes_moved),
    workloads={
        "paper": Workload("paper", {"M": 7168, "C": 256, "S": 16}),
        "cpu": Workload("cpu", {"M": 7168, "C": 512, "S": 16}),
        "small": Workload("small", {"M": 48, "C": 12, "S": 8}),
        "tiny": Workload("tiny", {"M": 40, "C": 5, "S": 6}),
    },
    directory=Path(__file__).parent,
    tolerance=3e-5,
    generator=generate,
)
