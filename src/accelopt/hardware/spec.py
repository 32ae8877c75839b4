"""The record of a device's ceilings, each figure with where it came from."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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
    provenance: dict[str, str] = Field(default_factory=dict)

    def key(self) -> str:
        """A short identity for caches: changes whenever a ceiling changes."""
        payload: dict[str, Any] = self.model_dump(exclude={"provenance"})
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        return f"{self.name}-{digest[:12]}"
