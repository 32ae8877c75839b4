"""Guard regions: catch a kernel that writes outside its buffers.

The memory either side of every host buffer (``buffers.allocate``: at least ``GUARD_BYTES`` each
side) is filled with seeded random signalling NaNs, a different pattern per buffer. The harness
never writes a signalling NaN (its poison is the quiet NaN) and arithmetic cannot produce one, so
after a call any guard float whose bits differ was written by the kernel: they are counted, and
the one furthest from the buffer is reported ("wrote 3 floats before the start of input 'x'").
Reads of a guard are not seen here (they return NaN, which spoils an output); reads and writes
beyond it reach the fence pages of the correctness calls (``buffers.FENCE_BYTES``).

Pure functions on NumPy arrays, so the bookkeeping is tested without running a kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

SIGN = np.uint32(1 << 31)
EXPONENT = np.uint32(0x7F800000)  # all ones: Inf or NaN
QUIET_BIT = 22  # clear in a signalling NaN
PAYLOAD = np.uint32((1 << QUIET_BIT) - 1)

Side = Literal["before", "after"]


@dataclass(frozen=True)
class Guards:
    """The two guard regions of one buffer (flat float32 views) and the bits written there."""

    before: np.ndarray  # its last float is just before the buffer's first
    after: np.ndarray  # its first float is just after the buffer's last
    before_bits: np.ndarray  # uint32
    after_bits: np.ndarray


@dataclass(frozen=True)
class Overrun:
    """Guard floats that changed on one side of a buffer."""

    side: Side
    floats: int  # how many were modified
    furthest: int  # distance in floats from the buffer's edge of the furthest one (1 = adjacent)


def signalling_nans(count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` random signalling-NaN bit patterns (random sign and non-zero payload)."""
    bits = rng.integers(0, 1 << 32, size=count, dtype=np.uint32)
    bits &= SIGN | PAYLOAD
    bits[(bits & PAYLOAD) == 0] |= np.uint32(1)  # a zero payload would be an infinity
    bits |= EXPONENT
    return bits


def arm(before: np.ndarray, after: np.ndarray, rng: np.random.Generator) -> Guards:
    """Fill both regions with fresh patterns; the record to check them against later."""
    bits = signalling_nans(before.size + after.size, rng)
    guards = Guards(before, after, bits[: before.size], bits[before.size :])
    before.view(np.uint32)[...] = guards.before_bits
    after.view(np.uint32)[...] = guards.after_bits
    return guards


def _changed(region: np.ndarray, bits: np.ndarray) -> np.ndarray:
    return np.flatnonzero(region.view(np.uint32) != bits)


def find_overruns(guards: Guards) -> list[Overrun]:
    """The sides whose guard floats changed since ``arm``; [] when the kernel stayed inside."""
    found = []
    before = _changed(guards.before, guards.before_bits)
    if before.size:
        found.append(Overrun("before", int(before.size), int(guards.before.size - before.min())))
    after = _changed(guards.after, guards.after_bits)
    if after.size:
        found.append(Overrun("after", int(after.size), int(after.max()) + 1))
    return found


_WORDS: dict[Side, tuple[str, str]] = {
    "before": ("before the start of", "before"),
    "after": ("past the end of", "past"),
}


def _floats(n: int) -> str:
    return f"{n} float" if n == 1 else f"{n} floats"


def describe(label: str, overruns: Sequence[Overrun]) -> str:
    """'wrote 1 float past the end of output 'y'', with the furthest offset when the writes do
    not all touch the buffer's edge; both sides joined by 'and'."""
    parts = []
    for o in overruns:
        edge, beyond = _WORDS[o.side]
        part = f"wrote {_floats(o.floats)} {edge} {label}"
        if o.furthest != o.floats:
            part += f" (the furthest {_floats(o.furthest)} {beyond} it)"
        parts.append(part)
    return " and ".join(parts)
