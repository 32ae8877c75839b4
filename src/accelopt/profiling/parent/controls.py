"""The control the worker times with a kernel, as the parent chooses and names it: the loop for a
problem's roofline bound (``spec_for``; a memory-bound problem's with its read:write ``mix``) and
the version of the loops' source (``version``: figures of another version are not comparable).
The worker runs it (``worker/control.py``); ``calibration.py`` turns its figures into the
calibrated % of peak."""

from __future__ import annotations

import hashlib

from accelopt.hardware.measure import sources_of
from accelopt.profiling.worker.protocol import CONTROL_SOURCE, ControlSpec


def mix(input_bytes: int, output_bytes: int) -> tuple[int, int]:
    """The arrays a memory control reads and writes for a problem that reads ``input_bytes`` and
    writes ``output_bytes``: the nearest of 1-4 read : 1 written, or 1 read : 1-4 written."""
    if output_bytes <= 0:
        return 4, 1
    ratio = input_bytes / output_bytes
    if ratio >= 1:
        return min(4, max(1, round(ratio))), 1
    return 1, min(4, max(1, round(1 / ratio)))


def spec_for(bound: str, input_bytes: int, output_bytes: int) -> ControlSpec:
    """The control for a problem of roofline ``bound`` (matmul, vector or memory)."""
    if bound == "matmul":
        return ControlSpec(kind="fma")
    if bound == "vector":
        return ControlSpec(kind="vector")
    reads, writes = mix(input_bytes, output_bytes)
    return ControlSpec(kind="memory", reads=reads, writes=writes)


def version() -> str:
    """A short digest of the control's source: figures of another version are not comparable."""
    return hashlib.sha256(sources_of(CONTROL_SOURCE)).hexdigest()[:8]
