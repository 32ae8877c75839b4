"""Count what a KernelBench model costs by running its forward under torch's dispatcher.

matmul FLOPs come from ``torch.utils.flop_counter.FlopCounterMode``; vector FLOPs are one per
output element of every other aten op (views, creations and pure copies count nothing), so a
reduction counts its outputs only: a lower bound. The run also tracks the peak bytes of live
intermediate tensors, to estimate the memory of the float64 reference. It runs on the meta device
(shapes only, no memory) or on real tensors alike. torch is imported inside the functions only.
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# aten ops that compute nothing: data movement, creation, randomness, bookkeeping.
NOT_COMPUTE = _words(
    """clone _to_copy copy copy_ contiguous cat stack _unsafe_view _reshape_alias lift_fresh
    lift_fresh_copy detach alias repeat constant_pad_nd flip roll index_select gather index
    slice_scatter select_scatter diagonal_scatter as_strided_scatter set_ resize_ resize_as_
    _local_scalar_dense _assert_async new_empty new_empty_strided new_zeros new_ones new_full
    empty empty_like empty_strided zeros zeros_like ones ones_like full full_like fill fill_ zero
    zero_ scalar_tensor arange linspace logspace eye rand rand_like randn randn_like randint
    randint_like randperm normal normal_ uniform uniform_ bernoulli bernoulli_ tril_indices
    triu_indices expand_copy permute_copy view_copy t_copy transpose_copy unsqueeze_copy
    squeeze_copy slice_copy select_copy unbind_copy split_copy split_with_sizes_copy
    narrow_copy diagonal_copy as_strided_copy _unsafe_index unsafe_split unsafe_split_with_sizes
    unsafe_chunk split split_with_sizes chunk unbind"""
)

BYTES_NOTE = "inputs, parameters and outputs read or written once (float32)"
VECTOR_CAVEAT = "(a lower bound: a reduction counts its outputs only)"


@dataclass
class Counts:
    matmul_flops: float = 0.0
    vector_flops: float = 0.0
    matmul_ops: dict[str, int] = field(default_factory=dict)
    vector_ops: dict[str, int] = field(default_factory=dict)
    peak_bytes: int = 0  # live intermediate tensors, in the run's dtype


@cache
def _counter_class() -> type:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.flop_counter import flop_registry

    matmul_packets = set(flop_registry)

    class OpCounter(TorchDispatchMode):
        def __init__(self, counts: Counts) -> None:
            super().__init__()
            self.counts = counts
            self.live = 0

        def _free(self, n: int) -> None:
            self.live -= n

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func._overloadpacket
            name = f"aten.{packet.__name__}"
            outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            given = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            floating = any(t.is_floating_point() for t in (*outs, *given))
            c = self.counts
            if packet in matmul_packets:
                c.matmul_ops[name] = c.matmul_ops.get(name, 0) + 1
            elif floating and not func.is_view and packet.__name__ not in NOT_COMPUTE:
                # (integer bookkeeping, such as BatchNorm's num_batches_tracked += 1, is free)
                c.vector_ops[name] = c.vector_ops.get(name, 0) + 1
                c.vector_flops += float(sum(t.numel() for t in outs))
            if not func.is_view:
                given_ids = {id(t) for t in given}
                for t in outs:
                    if id(t) not in given_ids:
                        n = t.numel() * t.element_size()
                        self.live += n
                        weakref.finalize(t, self._free, n)
                workspace = _conv_workspace(packet.__name__, args, outs)
                c.peak_bytes = max(c.peak_bytes, self.live + workspace)
            return out

    return OpCounter


CONVOLUTIONS = frozenset(
    ("convolution", "_convolution", "convolution_overrideable", "_slow_conv2d_forward")
)


def _conv_workspace(name: str, args: Sequence[Any], outs: Sequence[Any]) -> int:
    """Bytes of the im2col (col2im) buffer a float64 convolution on the CPU allocates for the
    whole batch: (in channels x kernel elements) x output positions per sample (input positions
    for a transposed one). The meta device does not show it, and it can dwarf the tensors."""
    if name not in CONVOLUTIONS or len(args) < 2 or not outs:
        return 0
    x, w = args[0], args[1]
    transposed = bool(args[6]) if len(args) > 6 and name != "_slow_conv2d_forward" else False
    groups = int(args[8]) if len(args) > 8 and name != "_slow_conv2d_forward" else 1
    try:
        per_position = w.shape[1] * groups * math.prod(w.shape[2:])
        positions = math.prod((x if transposed else outs[0]).shape[2:])
        return int(x.shape[0] * per_position * positions * outs[0].element_size())
    except (AttributeError, IndexError, TypeError):
        return 0


def count_forward(model: Any, inputs: Sequence[Any]) -> tuple[Any, Counts]:
    """forward's result, and what it cost (the caller handles exceptions)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counts = Counts()
    flops = FlopCounterMode(display=False)
    with torch.no_grad(), flops, _counter_class()(counts):
        out = model(*inputs)
    counts.matmul_flops = float(flops.get_total_flops())
    return out, counts


def _ops(ops: dict[str, int]) -> str:
    items = [f"{name} x{n}" for name, n in ops.items()]
    if len(items) > 8:
        items = [*items[:8], f"and {len(items) - 8} more"]
    return ", ".join(items)


def cost_notes(counts: Counts) -> dict[str, str]:
    matmul = (
        f"torch FLOP counter: {_ops(counts.matmul_ops)}"
        if counts.matmul_ops
        else "torch FLOP counter: no matrix multiplication or convolution"
    )
    vector = (
        f"one per output element of {_ops(counts.vector_ops)} {VECTOR_CAVEAT}"
        if counts.vector_ops
        else "one per output element of every other aten op: there is none"
    )
    return {"matmul_flops": matmul, "vector_flops": vector, "bytes": BYTES_NOTE}


# Optimistic float64 rates of a large CPU: a run estimated over a limit at these rates surely is.
FAST_MATMUL_RATE = 2e12
FAST_VECTOR_RATE = 2e10
FAST_BANDWIDTH = 2e11


def optimistic_seconds(counts: Counts, args_bytes32: int) -> float:
    """A lower bound on the float64 forward's time."""
    return (
        counts.matmul_flops / FAST_MATMUL_RATE
        + counts.vector_flops / FAST_VECTOR_RATE
        + 2 * args_bytes32 / FAST_BANDWIDTH
    )


def reference_bytes(counts: Counts | None, args_bytes32: int) -> int:
    """Memory of the float64 reference: the arguments as float64 arrays and as float64 tensors,
    plus the live intermediates (counted in float32) doubled."""
    peak32 = counts.peak_bytes if counts else 0
    return 4 * args_bytes32 + 2 * peak32


def available_memory() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 << 30
