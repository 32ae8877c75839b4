"""The roofline: the shortest time a kernel's cost allows on a device, and how close a kernel got.

Source of the formulas: docs/architecture.md, "Contracts" → "Roofline", after the AccelOpt paper's
NKIBench (each cost term divided by the ceiling of the unit that pays it; the largest term wins).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Cost

# Above this fraction of peak a kernel is faster than the roofline allows: a cheat, a wrong cost
# model or a wrong ceiling. 5 % of slack absorbs timer and clock noise (docs/architecture.md,
# Contracts: SUSPICIOUS).
SUSPICIOUS_FRACTION = 1.05


class Bound(StrEnum):
    """The roofline term that sets a kernel's peak time: the unit its cost keeps busiest."""

    MATMUL = "matmul"  # matmul FLOPs at the matmul rate
    VECTOR = "vector"  # vector FLOPs at the vector rate
    MEMORY = "memory"  # bytes moved at the memory bandwidth


# The order in which equal terms are resolved: the first listed wins a tie.
BOUNDS = (Bound.MATMUL, Bound.VECTOR, Bound.MEMORY)


@dataclass(frozen=True)
class Roofline:
    """The roofline time of one cost on one device, with each of its three terms."""

    peak_s: float
    bound: Bound  # the term that sets peak_s
    matmul_s: float
    vector_s: float
    memory_s: float


def roofline(cost: Cost, hw: HardwareSpec) -> Roofline:
    """The roofline time of ``cost`` on ``hw``; ties go to matmul, then vector, then memory."""
    # Contracts, Roofline: peak_s = max(matmul_flops / matmul_rate, vector_flops / vector_rate,
    #                         bytes / bandwidth)
    matmul_s = cost.matmul_flops / hw.matmul_rate
    vector_s = cost.vector_flops / hw.vector_rate
    memory_s = cost.bytes / hw.bandwidth
    terms = dict(zip(BOUNDS, (matmul_s, vector_s, memory_s), strict=True))
    bound = max(BOUNDS, key=lambda name: terms[name])  # max keeps the first of equal keys
    return Roofline(
        peak_s=terms[bound],
        bound=bound,
        matmul_s=matmul_s,
        vector_s=vector_s,
        memory_s=memory_s,
    )


def pct_of_peak(peak_s: float, latency_s: float) -> float:
    """The fraction of the roofline a kernel reached: 1.0 is the roofline itself."""
    if latency_s <= 0:
        raise ValueError(f"latency_s must be positive, got {latency_s}")
    # Contracts, Roofline: pct_of_peak = peak_s / latency_s
    return peak_s / latency_s


def is_suspicious(fraction: float) -> bool:
    """Whether a fraction of peak is beyond what the roofline allows (strictly above 1.05)."""
    return fraction > SUSPICIOUS_FRACTION
