"""Trusted set-up of a Triton kernel's process (``host.py``): torch and Triton imported and
configured, and a built-in kernel launched once under the torch guard, so that what Python and
Triton import or build lazily (the interpreter, the dispatch machinery, on a GPU the driver's
launcher) exists before the system call filter is installed and the kernel's code runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from accelopt.backends.triton import guard


@triton.jit
def _warm(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.exp(x) + tl.sqrt(x * x) + tl.sum(x, axis=0), mask=mask)


def configure(cache_dir: str | None) -> None:
    """Triton's knobs for this process, set in Triton (not the environment): its compile cache,
    and fp32 as the precision of a ``tl.dot`` that names none."""
    from triton import knobs

    propagate = knobs.propagate_env
    knobs.propagate_env = False
    try:
        if cache_dir:
            knobs.cache.dir = cache_dir
        knobs.language.fp32_default = "ieee"
    finally:
        knobs.propagate_env = propagate


def l2_flusher() -> Callable[[], Any]:
    """What clears the GPU's L2 cache before each timed call, as ``do_bench`` does."""
    try:
        from triton.runtime import driver

        cache = driver.active.get_empty_cache_for_benchmark()
        clear = driver.active.clear_cache
        return lambda: clear(cache)
    except (ImportError, AttributeError):
        buffer = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
        return buffer.zero_


def prepare(gpu: bool, cache_dir: str | None) -> Callable[[], Any] | None:
    """Import, configure and warm up; on a GPU, the L2 flusher (None on the CPU)."""
    configure(cache_dir)
    torch.set_num_threads(1)
    device = "cuda" if gpu else "cpu"
    if gpu:
        torch.cuda.init()
    x = torch.linspace(-1.0, 1.0, 64, device=device)
    y = torch.empty_like(x)
    watch = guard.TorchOpGuard()
    with watch:
        _warm[(2,)](x, y, 64, BLOCK=32)
    if watch.refused:
        raise RuntimeError(f"the warm-up kernel ran torch operators: {watch.refused}")
    return l2_flusher() if gpu else None
