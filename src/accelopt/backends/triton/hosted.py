"""The triton backend's devices: buffers a Triton kernel's own process (``kernel_host.py``) computes
on, which the worker reads, writes and checks itself.

On the CPU (Triton's interpreter) a buffer is a memory file mapped by both processes: the worker's
NumPy view and the kernel's torch view are the same memory, between guard regions of seeded random
signalling NaNs (as ``buffers.py`` lays out host buffers). On a GPU a buffer is a CUDA tensor the
kernel's process made while it was trusted, opened here through its IPC handle. Calls go to the
process as batches of buffer ids; the worker times each batch by its own clock.
"""

from __future__ import annotations

import base64
import mmap
import os
import pickle
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelopt.backends.canary import Canaries
from accelopt.backends.containment import DROP_TO_NOBODY, NOBODY, drop_mode
from accelopt.backends.guards import Guards, signalling_nans
from accelopt.backends.remote_kernel import InOwnProcess, RemoteKernel, batch
from accelopt.backends.triton.kernel_host import CALIBRATION_ROUNDS, KernelHost

GUARD_FLOATS = 1024  # each side of a buffer in shared memory (one page)


@dataclass(eq=False)
class HostedBuffer:
    """A float32 buffer the kernel's process sees as a tensor; ``array`` is the worker's view
    (NumPy on the CPU, a torch tensor opened by IPC handle on a GPU)."""

    id: int
    shape: tuple[int, ...]
    array: Any
    guards: Guards | None = None
    mapping: Any = field(default=None, repr=False)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return 4 * self.size


class HostedDevice(InOwnProcess):
    """Buffers in a Triton kernel's own process; ``gpu``: CUDA tensors, else shared memory."""

    copies_to_host = True  # the kernel's process shares the memory: a read is a copy
    batches: bool  # several calls per round trip where calls are timed (on a GPU)
    # the kernel host subtracts the round trip it calibrated itself (``load``), shared with none
    overhead_s: float | None = None

    def __init__(self, gpu: bool, seed: int | None = None) -> None:
        self.gpu = gpu
        self._rng = np.random.default_rng(seed)
        self._made = 0
        self._scratch = _scratch_folder() if gpu else None
        self.host = KernelHost(gpu)
        try:
            self.host.start(self._scratch)
        except BaseException:
            self.close()
            raise
        self.batches = gpu

    # -- buffers ------------------------------------------------------------------------------
    def empty(
        self, shape: tuple[int, ...], fill: float | None = None, fenced: bool = False
    ) -> HostedBuffer:
        """``fenced`` is not honoured: guard regions, no inaccessible pages, around a buffer."""
        self._made += 1
        buffer = self._cuda(shape) if self.gpu else self._shared(shape)
        if fill is not None:
            self.fill(buffer, fill)
        return buffer

    def _shared(self, shape: tuple[int, ...]) -> HostedBuffer:
        count = int(np.prod(shape, dtype=np.int64))
        total = 4 * (count + 2 * GUARD_FLOATS)
        fd = os.memfd_create("accelopt-buffer", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, total)
            mapping = mmap.mmap(fd, total, flags=mmap.MAP_SHARED)
            request = {
                "op": "alloc",
                "id": self._made,
                "shape": list(shape),
                "bytes": total,
                "offset": 4 * GUARD_FLOATS,
                "count": count,
            }
            self.host.ask(request, [fd])
        finally:
            os.close(fd)
        flat = np.frombuffer(mapping, dtype=np.float32)
        before, array, after = np.split(flat, [GUARD_FLOATS, GUARD_FLOATS + count])
        bits = signalling_nans(2 * GUARD_FLOATS, self._rng)
        guards = Guards(before, after, bits[:GUARD_FLOATS], bits[GUARD_FLOATS:])
        before.view(np.uint32)[...] = guards.before_bits
        after.view(np.uint32)[...] = guards.after_bits
        return HostedBuffer(self._made, tuple(shape), array.reshape(shape), guards, mapping)

    def _cuda(self, shape: tuple[int, ...]) -> HostedBuffer:
        from torch.multiprocessing.reductions import rebuild_cuda_tensor

        answer = self.host.ask({"op": "alloc", "id": self._made, "shape": list(shape)})
        args = pickle.loads(base64.b64decode(answer["handle"]))
        return HostedBuffer(self._made, tuple(shape), rebuild_cuda_tensor(*args))

    def upload(self, host: np.ndarray, into: HostedBuffer | None = None) -> HostedBuffer:
        if into is None:
            into = self.empty(host.shape)
        data = np.ascontiguousarray(host, dtype=np.float32)
        if self.gpu:
            import torch

            into.array.copy_(torch.from_numpy(data))
        else:
            np.copyto(into.array, data)
        return into

    def fill(self, buffer: HostedBuffer, value: float) -> None:
        if self.gpu:
            buffer.array.fill_(value)
        else:
            buffer.array.fill(value)

    def to_host(self, buffer: HostedBuffer, out: np.ndarray | None = None) -> np.ndarray:
        host = buffer.array.cpu().numpy() if self.gpu else buffer.array
        if out is None:
            return np.array(host, dtype=np.float32, copy=True)
        np.copyto(out, host)
        return out

    def guards(self, buffer: HostedBuffer) -> Guards | None:
        return buffer.guards

    def canaries(self, outputs_per_set: Sequence[Sequence[HostedBuffer]], seed: int) -> Canaries:
        return Canaries([[b.array for b in outs] for outs in outputs_per_set], seed)

    def poke(self, buffer: HostedBuffer, flat: np.ndarray, values: np.ndarray) -> None:
        if self.gpu:
            import torch

            index = torch.as_tensor(np.asarray(flat, dtype=np.int64), device=buffer.array.device)
            source = torch.as_tensor(np.asarray(values, dtype=np.float32), device=index.device)
            buffer.array.view(-1)[index] = source
        else:
            buffer.array.reshape(-1)[flat] = values

    # -- the kernel ---------------------------------------------------------------------------
    def load(self, source: str, memory_cap_bytes: int) -> RemoteKernel:
        """Contain the process, check it, calibrate the round trip, import the kernel there."""
        self.host.contain(source, memory_cap_bytes)
        if self.gpu:
            rounds = [self.host.call_batch([]) for _ in range(CALIBRATION_ROUNDS)]
            self.host.overhead_s = min(rounds)
        self.host.load()
        return RemoteKernel(self.host, lambda buffer: buffer.id)

    def time_call(self, call: Callable[[], None]) -> float:
        return self.time_calls([call])

    def time_calls(self, calls: Sequence[Callable[[], None]]) -> float:
        return self.host.call_batch(batch(calls))

    def close(self) -> None:
        self.host.kill()
        if self._scratch is not None:
            import shutil

            shutil.rmtree(self._scratch, ignore_errors=True)


def _scratch_folder() -> str:
    """A fresh folder for what Triton compiles in the kernel's process (its cache: one per
    evaluation, so no kernel can leave a compiled file for another to load)."""
    path = tempfile.mkdtemp(prefix="accelopt-triton-")
    if drop_mode() == DROP_TO_NOBODY:
        os.chown(path, NOBODY, NOBODY)
    return path
