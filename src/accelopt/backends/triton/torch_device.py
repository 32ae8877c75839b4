"""Buffers as torch tensors: on an NVIDIA GPU, where calls are timed as Triton's ``do_bench``
times them (the L2 cache cleared with do_bench's own buffer before each call, CUDA events around
it), or on the CPU for Triton's interpreter (checked, never timed by accelopt), so that the same
buffer, copy and canary code runs in CI as on a GPU.

Each timed call is waited for before the next: the harness checks its canaries in between. The
GPU stays busy clearing the L2 cache while the launcher's Python runs, so the launch overhead is
hidden as it is in do_bench; what the events time is the kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from accelopt.backends.canary import Canaries
from accelopt.backends.device import wall_time

L2_FLUSH_BYTES = 256 << 20  # what do_bench clears, when Triton's driver does not say


def _l2_flusher() -> Callable[[], Any]:
    try:
        from triton.runtime import driver

        cache = driver.active.get_empty_cache_for_benchmark()
        clear = driver.active.clear_cache
        return lambda: clear(cache)
    except (ImportError, AttributeError):  # older Triton: clear a buffer of our own
        buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
        return buffer.zero_


class TorchDevice:
    """``cuda``: the current CUDA device (the first of ``CUDA_VISIBLE_DEVICES``); ``cpu``: host
    tensors for Triton's interpreter."""

    def __init__(self, kind: str = "cuda") -> None:
        if kind == "cuda":
            torch.cuda.init()
            self.device = torch.device("cuda", torch.cuda.current_device())
            self._flush = _l2_flusher()
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
        else:
            self.device = torch.device(kind)

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    def empty(
        self, shape: tuple[int, ...], fill: float | None = None, fenced: bool = False
    ) -> torch.Tensor:
        """``fenced`` is ignored: tensors get no guard regions or fences yet."""
        if fill is None:
            return torch.empty(shape, dtype=torch.float32, device=self.device)
        return torch.full(shape, fill, dtype=torch.float32, device=self.device)

    def upload(self, host: np.ndarray, into: torch.Tensor | None = None) -> torch.Tensor:
        if into is None:
            into = self.empty(host.shape)
        into.copy_(torch.from_numpy(np.ascontiguousarray(host, dtype=np.float32)))
        return into

    def fill(self, buffer: torch.Tensor, value: float) -> None:
        buffer.fill_(value)

    def to_host(self, buffer: torch.Tensor, out: np.ndarray | None = None) -> np.ndarray:
        host = buffer.cpu().numpy()  # waits for the GPU; on the CPU, a view
        if out is None:
            return host
        np.copyto(out, host)
        return out

    def guards(self, buffer: torch.Tensor) -> None:
        """No guard regions around tensors yet: out-of-bounds writes are not checked here."""
        return None

    def canaries(self, outputs_per_set: Sequence[Sequence[torch.Tensor]], seed: int) -> Canaries:
        return Canaries(outputs_per_set, seed)

    def poke(self, buffer: torch.Tensor, flat: np.ndarray, values: np.ndarray) -> None:
        index = torch.as_tensor(np.asarray(flat, dtype=np.int64), device=self.device)
        source = torch.as_tensor(np.asarray(values, dtype=np.float32), device=self.device)
        buffer.view(-1)[index] = source

    def time_calls(self, calls: Sequence[Callable[[], None]]) -> float:
        return sum(self.time_call(call) for call in calls)

    def time_call(self, call: Callable[[], None]) -> float:
        if not self.on_gpu:
            return wall_time(call)
        self._flush()
        self._start.record()
        call()
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) / 1e3
