"""The record of a device's ceilings, each figure with where it came from."""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Confidence(StrEnum):
    """How sure a measured ceiling is: ``sure`` when its rounds agreed, its repeats were steady and
    the machine was quiet; ``unsure`` otherwise (the spec is then provisional)."""

    SURE = "sure"
    UNSURE = "unsure"


# Fields that say how the figures were measured and how far to trust them, not which device nor
# which figures: left out of ``key()`` (results measured against a spec stay its results when
# only these change) and ignored by ``cache.same_device``.
MEASUREMENT_NOTES = frozenset(
    {"provenance", "provisional", "spread", "disagreement", "confidence", "doubts"}
    | {"library", "library_scale"}
)


# The backends the specs this layer makes are for (``HardwareSpec.backend``): this machine's CPU
# and a GPU. The backend registry holds records of these names that run there
# (``tests/backends/test_registry.py``); code above reads ``on_host``, not these names.
HOST_BACKEND = "cpu"
GPU_BACKEND = "triton"


class HardwareSpec(BaseModel):
    """Ceilings of one device, as the roofline uses them.

    ``matmul_rate`` and ``vector_rate`` are FLOP/s, ``bandwidth`` is bytes/s. ``provenance`` holds,
    per figure, where it came from: a datasheet (with its source) or the micro-benchmark that
    measured it, on which date.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    backend: str = Field(
        description="the backend whose kernels run on this device: cpu, triton, nki"
    )
    matmul_rate: float = Field(gt=0)
    vector_rate: float = Field(gt=0)
    bandwidth: float = Field(gt=0)
    cores: int = Field(gt=0, description="cores, SMs or NeuronCores used by one kernel")
    llc_bytes: int | None = Field(default=None, description="last-level cache, when known")
    arch: str | None = Field(default=None, description="CPU architecture: x86_64, aarch64")
    isa: tuple[str, ...] = Field(
        default=(), description="vector ISA features kernels are compiled for: avx2, fma, neon"
    )
    vector_bits: int | None = Field(default=None, description="widest float vector, in bits")
    l1d_bytes: int | None = Field(default=None, description="L1 data cache of one core")
    l2_bytes: int | None = Field(default=None, description="L2 cache of one instance")
    provisional: bool = Field(
        default=False,
        description="measured while the machine was busy or while contention came and went (its "
        "rounds disagreed): re-measured when it is quiet",
    )
    doubts: tuple[str, ...] = Field(
        default=(),
        description="what made the figures provisional, in a few words each: 'bandwidth rounds "
        "44% apart', '1-minute load average 2.90 on 2 CPUs', 'vector rate 1/7 of the FMA rate'",
    )
    spread: dict[str, float] = Field(
        default_factory=dict,
        description="per ceiling: (best - median) / best over the micro-benchmark's repeats",
    )
    disagreement: dict[str, float] = Field(
        default_factory=dict,
        description="per ceiling: (max - min) / max of the best figures of the measurement's "
        "rounds, spaced in time, and its control at the end: 0 when they agree; contention that "
        "came and went during the measurement shows here",
    )
    confidence: dict[str, Confidence] = Field(
        default_factory=dict,
        description="per ceiling: sure (rounds agreed, repeats steady, machine quiet) or unsure",
    )
    library: dict[str, float] = Field(
        default_factory=dict,
        description="per ceiling: the best figure a library reached here (torch's or NumPy's "
        "sgemm, a parallel copy), measured with the ceilings (hardware/library_check.py)",
    )
    library_scale: dict[str, float] = Field(
        default_factory=dict,
        description="per ceiling a library beat even re-measured: the library's figure over the "
        "micro-benchmark's; the ceiling was raised to the library's, and the control timed with "
        "each kernel is scaled by this",
    )
    provenance: dict[str, str] = Field(default_factory=dict)

    @property
    def on_host(self) -> bool:
        """Whether this is a spec of this machine's CPU (else a GPU's, or a datasheet's)."""
        return self.backend == HOST_BACKEND

    def key(self) -> str:
        """A short identity for caches: changes whenever a ceiling or the ISA changes."""
        payload: dict[str, Any] = self.model_dump(exclude=set(MEASUREMENT_NOTES))
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        return f"{self.name}-{digest[:12]}"
