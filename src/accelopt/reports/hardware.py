"""A device's ceilings as the report pages show them: each figure with where it came from."""

from __future__ import annotations

from dataclasses import dataclass

from accelopt.hardware.spec import HardwareSpec


@dataclass(frozen=True)
class Ceiling:
    name: str
    value: str
    source: str  # the spec's provenance for this figure, "" when it has none


def ceilings(spec: HardwareSpec) -> tuple[Ceiling, ...]:
    figures = [
        ("matmul rate", "matmul_rate", f"{spec.matmul_rate / 1e9:,.1f} GFLOP/s"),
        ("vector rate", "vector_rate", f"{spec.vector_rate / 1e9:,.1f} GFLOP/s"),
        ("bandwidth", "bandwidth", f"{spec.bandwidth / 1e9:,.1f} GB/s"),
        ("cores", "cores", str(spec.cores)),
    ]
    if spec.llc_bytes:
        figures.append(("last-level cache", "llc_bytes", f"{spec.llc_bytes / 2**20:g} MiB"))
    return tuple(
        Ceiling(name, value, spec.provenance.get(field, "")) for name, field, value in figures
    )
