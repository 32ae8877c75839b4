"""The cpu backend's device: buffers in the kernel's own process (``kernel_process.py``),
reached by the worker through ``process_vm_readv``/``process_vm_writev``.

Every buffer is made before the kernel is loaded (the kernel host is trusted until then), with the
same layout as ``buffers.py``: guard regions of seeded random signalling NaNs either side, fenced
by inaccessible pages for the correctness calls. After the load, only the worker's reads decide
anything: outputs, guards and canaries are read from the kernel host's memory after each batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from accelopt import settings
from accelopt.backends.base import KernelLoadError
from accelopt.backends.buffers import FENCE_BYTES, GUARD_BYTES, PAGE_BYTES
from accelopt.backends.cpu.kernel_process import MAX_CALLS, KernelHost, RemoteBuffer
from accelopt.backends.guards import Guards, signalling_nans
from accelopt.backends.remote_kernel import InOwnProcess, RemoteKernel, batch
from accelopt.hardware.toolchain import Compiler

_F32 = 4
# Successive buffers start this far apart within their pages (17 cache lines, wrapping at a page):
# buffers that all start on a page boundary alias in the L1 (4 KiB aliasing) and slowed a kernel
# reading several of them with one index (mamba's baseline) by 2x; heap buffers never all do.
STAGGER_BYTES = 17 * 64
FILL_FLOATS = 1 << 16  # a fill writes copies of a block this long (256 KiB)


class RemoteCanaries:
    """``canary.Canaries`` in the kernel host's memory: each armed set's outputs get NaN at the
    first, the last and one random element; ``written`` checks every set armed since the last
    check (a batch of calls)."""

    def __init__(
        self, device: KernelHostDevice, outputs_per_set: Sequence[Sequence[RemoteBuffer]], seed: int
    ) -> None:
        self._device = device
        self._sets = outputs_per_set
        self._rng = np.random.default_rng(seed)
        self._armed: list[tuple[RemoteBuffer, np.ndarray]] = []

    def arm(self, set_index: int) -> None:
        for out in self._sets[set_index]:
            where = np.array([0, out.size - 1, self._rng.integers(out.size)])
            self._device.poke(out, where, np.full(3, np.nan, dtype=np.float32))
            self._armed.append((out, where))

    def written(self) -> bool:
        armed, self._armed = self._armed, []
        if not armed:
            return True
        return not np.isnan(self._device.peek_many(armed)).any()


class KernelHostDevice(InOwnProcess):
    """Host memory in a separate, sandboxed process; a batch of calls is timed by the worker."""

    batches = True  # several calls per round trip (timing.py picks how many)
    copies_to_host = True  # ``to_host`` reads into a new array: the caller owns it

    def __init__(self, cc: Compiler, env: Mapping[str, str], seed: int | None = None) -> None:
        self.host = KernelHost(cc, env)
        self._rng = np.random.default_rng(seed)
        self._guards: dict[RemoteBuffer, tuple[np.ndarray, np.ndarray]] = {}
        self._made = 0
        self._fills: dict[bytes, np.ndarray] = {}  # a small block of each fill value
        self.host.calibrate()

    # -- buffers -----------------------------------------------------------------------------
    def empty(
        self, shape: tuple[int, ...], fill: float | None = None, fenced: bool = False
    ) -> RemoteBuffer:
        count = int(np.prod(shape, dtype=np.int64))
        offset = (self._made * STAGGER_BYTES) % PAGE_BYTES
        self._made += 1
        address, before, after = self.host.alloc(
            count * _F32, GUARD_BYTES, FENCE_BYTES if fenced else 0, offset
        )
        buffer = RemoteBuffer(address, tuple(shape), before, after)
        bits = signalling_nans((before + after) // _F32, self._rng)
        self._guards[buffer] = (bits[: before // _F32], bits[before // _F32 :])
        self.host.write(address - before, bits[: before // _F32])
        self.host.write(address + buffer.nbytes, bits[before // _F32 :])
        if fill is not None:
            self.fill(buffer, fill)
        return buffer

    def upload(self, host: np.ndarray, into: RemoteBuffer | None = None) -> RemoteBuffer:
        if into is None:
            into = self.empty(host.shape)
        self.host.write(into.address, np.asarray(host, dtype=np.float32))
        return into

    def fill(self, buffer: RemoteBuffer, value: float) -> None:
        """Every element set to ``value``: copies of one small block of it (a host array the
        buffer's size is memory touched for nothing: ``hostmemory.py``)."""
        key = np.float32(value).tobytes()  # NaN is no dict key: its bits are
        block = self._fills.get(key)
        if block is None:
            block = self._fills[key] = np.full(FILL_FLOATS, value, dtype=np.float32)
        self.host.write_repeated(buffer.address, block, buffer.nbytes)

    def to_host(self, buffer: RemoteBuffer, out: np.ndarray | None = None) -> np.ndarray:
        """The buffer's contents, in a new array or in ``out`` (float32, of its shape)."""
        if out is None:
            out = np.empty(buffer.shape, dtype=np.float32)
        elif out.shape != buffer.shape or out.dtype != np.float32:
            raise ValueError(f"to_host into an array of {out.shape}: the buffer is {buffer.shape}")
        self.host.read_into(buffer.address, out)
        return out

    def poke(self, buffer: RemoteBuffer, flat: np.ndarray, values: np.ndarray) -> None:
        """Write float32 ``values`` at the flat indices ``flat`` (made before the next call or
        access, with the other pokes: ``KernelHost.poke``)."""
        values = np.asarray(values, dtype=np.float32)
        self.host.poke(
            [(buffer.address + _F32 * int(i), values[j : j + 1]) for j, i in enumerate(flat)]
        )

    def peek_many(self, places: Sequence[tuple[RemoteBuffer, np.ndarray]]) -> np.ndarray:
        """The float32 values at each (buffer, flat indices), in order, read together."""
        items = [(b.address + _F32 * int(i), _F32) for b, flat in places for i in flat]
        return np.concatenate(self.host.read_scattered(items)).view(np.float32)

    def guards(self, buffer: RemoteBuffer) -> Guards | None:
        bits = self._guards.get(buffer)
        if bits is None:
            return None
        before = self.host.read(buffer.address - buffer.before_bytes, buffer.before_bytes)
        after = self.host.read(buffer.address + buffer.nbytes, buffer.after_bytes)
        return Guards(before.view(np.float32), after.view(np.float32), bits[0], bits[1])

    def canaries(
        self, outputs_per_set: Sequence[Sequence[RemoteBuffer]], seed: int
    ) -> RemoteCanaries:
        return RemoteCanaries(self, outputs_per_set, seed)

    # -- calls -------------------------------------------------------------------------------
    def load(
        self, artifact: Path, n_args: int, threads: int, memory_cap_bytes: int
    ) -> RemoteKernel:
        try:
            self.host.load(artifact, threads, memory_cap_bytes, settings.sandbox_required())
        except KernelLoadError:
            self.host.kill()
            raise
        return RemoteKernel(self.host, lambda buffer: buffer.address)

    def time_call(self, call: Callable[[], None]) -> float:
        return self.time_calls([call])

    def time_calls(self, calls: Sequence[Callable[[], None]]) -> float:
        """Seconds of one batch of calls, by the worker's clock, less the calibrated round trip."""
        return self.host.call_batch(batch(calls, MAX_CALLS))

    @property
    def overhead_s(self) -> float | None:
        """The round trip the kernel host subtracts from every batch (calibrated when it starts)."""
        return self.host.overhead_s

    @overhead_s.setter
    def overhead_s(self, seconds: float | None) -> None:
        if seconds is not None:
            self.host.overhead_s = seconds

    def close(self) -> None:
        self.host.kill()


def probe_isolation(cc: Compiler, env: Mapping[str, str]) -> dict[str, str]:
    """The layers a kernel's process gets on this system (a process applies them and exits)."""
    return KernelHost(cc, env).probe()
