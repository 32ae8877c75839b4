"""Where a kernel's buffers live and how one call is timed: the host (NumPy), a C kernel's own
process (``backends.cpu.remote``), or a Triton kernel's own process (``backends.triton.hosted``:
shared memory for Triton's interpreter, CUDA tensors on a GPU).

The harness (``profiling.run``) is written once against this protocol: it makes buffers, copies
inputs in and results out, sets canaries and times calls through the device of the kernel's
backend, so the same correctness and timing rules hold on every device.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from accelopt.backends.buffers import FENCE_BYTES, allocate
from accelopt.backends.canary import Canaries
from accelopt.backends.guards import Guards, arm

Buffer = Any  # a numpy array on the host, a torch tensor on a GPU


class CanarySet(Protocol):
    def arm(self, set_index: int) -> None: ...

    def written(self) -> bool: ...


@runtime_checkable
class Device(Protocol):
    """What the harness does with a kernel's buffers and calls, on every device (the module's
    docstring); every member is declared here, so the harness never probes for one."""

    def empty(
        self, shape: tuple[int, ...], fill: float | None = None, fenced: bool = False
    ) -> Buffer:
        """A new float32 buffer, filled with ``fill`` when given; ``fenced``: for the correctness
        calls, with inaccessible memory beyond its guard regions where the device can."""
        ...

    def upload(self, host: np.ndarray, into: Buffer | None = None) -> Buffer:
        """``host``'s contents in a device buffer: ``into`` when given, else a new one."""
        ...

    def fill(self, buffer: Buffer, value: float) -> None: ...

    def to_host(self, buffer: Buffer, out: np.ndarray | None = None) -> np.ndarray:
        """The buffer's contents as a host array (no copy where the buffer is on the host), or
        copied into ``out`` (float32, the buffer's shape), which is returned."""
        ...

    def guards(self, buffer: Buffer) -> Guards | None:
        """The guard regions written around ``buffer`` when it was made (``guards.py``), or None
        where this device keeps none."""
        ...

    def canaries(self, outputs_per_set: Sequence[Sequence[Buffer]], seed: int) -> CanarySet: ...

    def poke(self, buffer: Buffer, flat: np.ndarray, values: np.ndarray) -> None:
        """Write float32 ``values`` at the flat indices ``flat`` of ``buffer``."""
        ...

    def time_call(self, call: Callable[[], None]) -> float:
        """Seconds one call takes on the device (the call has finished when this returns)."""
        ...

    def time_calls(self, calls: Sequence[Callable[[], None]]) -> float:
        """Seconds a batch of calls takes (a device that times each call itself gets batches of
        one; ``batches`` is True on a device that gains from more)."""
        ...

    @property
    def batches(self) -> bool:
        """Whether a batch of several calls gains over batches of one (a round trip to the
        kernel's process is then paid once a batch); False: every batch is one call."""
        ...

    @property
    def copies_to_host(self) -> bool:
        """Whether ``to_host`` copies (into a new array, or ``out``) rather than returning the
        buffer itself: the caller may then hand it an array it keeps, the same for every call."""
        ...

    @property
    def kernel_pids(self) -> tuple[int, ...]:
        """The processes the kernel runs in, apart from the worker's (their CPU time is the
        evaluation's, and they are pinned, stopped and watched); () where it runs in the
        worker's own process."""
        ...

    @property
    def isolation(self) -> dict[str, str] | None:
        """The isolation layers the kernel's own process got (reported with the evaluation), or
        None where the kernel runs in the worker's process."""
        ...

    overhead_s: float | None
    """Seconds of one round trip to the kernel's process, subtracted from every timed batch
    (a re-timing session sets all its kernels' to the least of them); None where the device
    shares none (it times calls itself, or subtracts a figure of its own)."""

    def pause(self) -> None:
        """Stop the kernel's process between its calls (it runs only while the harness calls
        it); nothing where there is no such process."""
        ...

    def resume(self) -> None:
        """Let the kernel's process run again after ``pause``."""
        ...

    def close(self) -> None:
        """End the kernel's process and free what the device holds (its buffers are gone)."""
        ...


def wall_time(call: Callable[[], None]) -> float:
    """Seconds of wall clock around one call."""
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


class HostDevice:
    """Buffers in host memory, 64-byte aligned, each between guard regions of seeded random
    signalling NaNs (fenced ones between inaccessible pages too); a call is timed by the wall
    clock around it. ``seed`` None: patterns no kernel can know in advance. The kernel runs in
    the worker's own process: no process of its own to stop, watch or close."""

    batches = False
    copies_to_host = False  # ``to_host`` returns the buffer itself
    kernel_pids: tuple[int, ...] = ()
    isolation: dict[str, str] | None = None
    overhead_s: float | None = None

    def __init__(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)
        self._guards: dict[int, Guards] = {}  # by id() of a live buffer

    def empty(
        self, shape: tuple[int, ...], fill: float | None = None, fenced: bool = False
    ) -> np.ndarray:
        block = allocate(shape, fence_bytes=FENCE_BYTES if fenced else 0)
        array = block.array
        self._guards[id(array)] = arm(block.before, block.after, self._rng)
        weakref.finalize(array, self._guards.pop, id(array), None)
        if fill is not None:
            array.fill(fill)
        return array

    def upload(self, host: np.ndarray, into: np.ndarray | None = None) -> np.ndarray:
        if into is None:
            into = self.empty(host.shape)
        np.copyto(into, host)
        return into

    def fill(self, buffer: np.ndarray, value: float) -> None:
        buffer.fill(value)

    def to_host(self, buffer: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            return buffer
        np.copyto(out, buffer)
        return out

    def guards(self, buffer: np.ndarray) -> Guards | None:
        return self._guards.get(id(buffer))

    def canaries(self, outputs_per_set: Sequence[Sequence[np.ndarray]], seed: int) -> Canaries:
        return Canaries(outputs_per_set, seed)

    def poke(self, buffer: np.ndarray, flat: np.ndarray, values: np.ndarray) -> None:
        buffer.reshape(-1)[flat] = values

    def time_call(self, call: Callable[[], None]) -> float:
        return wall_time(call)

    def time_calls(self, calls: Sequence[Callable[[], None]]) -> float:
        return sum(wall_time(call) for call in calls)

    def pause(self) -> None:
        """Nothing to stop: the kernel's code runs only when the harness calls it."""

    def resume(self) -> None:
        """Nothing was stopped."""

    def close(self) -> None:
        """Nothing to end: the buffers go with their last reference."""
