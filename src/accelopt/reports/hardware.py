"""A device's ceilings as the report pages show them: each figure with where it came from."""

from __future__ import annotations

from dataclasses import dataclass

from accelopt.formatting import giga
from accelopt.hardware.spec import HardwareSpec


@dataclass(frozen=True)
class Ceiling:
    name: str
    value: str
    source: str  # the spec's provenance for this figure, "" when it has none
    confidence: str = ""  # "sure" or "unsure" for a measured ceiling, "" when not judged


def ceilings(spec: HardwareSpec) -> tuple[Ceiling, ...]:
    figures = [
        ("matmul rate", "matmul_rate", giga(spec.matmul_rate, "FLOP/s")),
        ("vector rate", "vector_rate", giga(spec.vector_rate, "FLOP/s")),
        ("bandwidth", "bandwidth", giga(spec.bandwidth, "B/s")),
        ("cores", "cores", str(spec.cores)),
    ]
    if spec.llc_bytes:
        figures.append(("last-level cache", "llc_bytes", f"{spec.llc_bytes / 2**20:g} MiB"))
    return tuple(
        Ceiling(name, value, spec.provenance.get(field, ""), spec.confidence.get(field, ""))
        for name, field, value in figures
    )
