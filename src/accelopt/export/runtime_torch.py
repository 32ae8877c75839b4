"""The export runtime's PyTorch side: a triton kernel's calls on device tensors, and the
``torch.library`` custom op. ``runtime.py`` loads this file from beside itself when it is first
needed; torch is imported here only."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


class ShapeOnly:
    """What ``bind_sizes`` reads of an argument, for a fake tensor (no data)."""

    def __init__(self, name: str, shape: Sequence[int]) -> None:
        self.name = name
        self.array = np.lib.stride_tricks.as_strided(
            np.zeros(1, np.float32), tuple(shape), [0] * len(shape)
        )


def _core(kernel: Any) -> Any:
    """runtime.py's module (its name differs from one export folder to another)."""
    return sys.modules[type(kernel).__module__]


def _torch() -> Any:
    import torch

    return torch


def triton_callable(kernel: Any) -> Callable[..., None]:
    """The triton kernel module's launcher, on inputs then outputs (tensors on its device)."""
    module = _core(kernel).import_file(
        kernel.folder / kernel.manifest["source"],
        f"_accelopt_triton_{kernel.manifest['kernel_hash'][:12]}",
    )
    return lambda inputs, outputs: module.kernel(*inputs, *outputs)


def call_triton(
    kernel: Any,
    values: Sequence[Any],
    out: Any,
    policy: str | None,
    verify: bool | None,
    reference: Callable[..., Any] | None,
) -> Any:
    """A triton kernel takes tensors on the GPU (on the CPU under TRITON_INTERPRET=1), checked
    and routed as C kernels are; NumPy arrays are moved there and the outputs come back as
    NumPy."""
    torch = _torch()
    device = torch.device("cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda")
    as_numpy = not any(_core(kernel)._is_tensor(v) for v in values)
    names = [n for n, _ in kernel.inputs]
    tensors = [device_tensor(kernel, n, v, device) for n, v in zip(names, values, strict=True)]
    outs = None if out is None else _given_outputs(kernel, out, device)
    shapes = [ShapeOnly(n, t.shape) for n, t in zip(names, tensors, strict=True)]
    sizes = kernel.bind_sizes(shapes, None if outs is None else _shape_outputs(kernel, outs))
    if outs is None:
        outs = [
            torch.empty(_dims(spec, sizes), dtype=torch.float32, device=device)
            for _, spec in kernel.outputs
        ]
    kernel._run(sizes, tensors, outs, policy, verify, reference)
    results = [o.cpu().numpy() if as_numpy and out is None else o for o in outs]
    return results[0] if len(results) == 1 else tuple(results)


def _given_outputs(kernel: Any, out: Any, device: Any) -> list[Any]:
    given = list(out) if isinstance(out, tuple | list) else [out]
    if len(given) != len(kernel.outputs):
        raise ValueError(f"out= takes {len(kernel.outputs)} arrays, got {len(given)}")
    names = [f"out ({n})" for n, _ in kernel.outputs]
    return [device_tensor(kernel, n, v, device) for n, v in zip(names, given, strict=True)]


def _shape_outputs(kernel: Any, outs: Sequence[Any]) -> list[Any]:
    core = _core(kernel)
    return [
        core._Output(ShapeOnly(n, t.shape).array, t, True)
        for (n, _), t in zip(kernel.outputs, outs, strict=True)
    ]


def _dims(spec: Sequence[str], sizes: dict[str, int]) -> list[int]:
    return [int(d) if d.isdigit() else sizes[d] for d in spec]


def device_tensor(kernel: Any, name: str, value: Any, device: Any) -> Any:
    """``value`` as a float32 contiguous tensor on ``device``, or a ValueError naming it."""
    torch = _torch()
    if isinstance(value, np.ndarray):
        if value.dtype != np.float32:
            raise ValueError(f"{name} has dtype {value.dtype}; this kernel takes float32")
        value = torch.from_numpy(np.ascontiguousarray(value)).to(device)
    elif not _core(kernel)._is_tensor(value):
        raise ValueError(f"{name} must be a torch tensor or a NumPy array, not {type(value)}")
    if value.dtype != torch.float32:
        raise ValueError(f"{name} has dtype {value.dtype}; this kernel takes float32")
    if not value.is_contiguous():
        raise ValueError(f"{name} is not contiguous; pass {name}.contiguous()")
    if value.device.type != device.type:
        raise ValueError(f"{name} is on {value.device}; this kernel runs on {device}")
    return value


def torch_op(kernel: Any) -> Any:
    """The kernel as a ``torch.library`` custom op (CPU), opaque to ``torch.compile``:
    ``torch.ops.accelopt_export.<problem>_<hash>``, with a fake implementation for shapes, and
    a backward that refuses in one sentence (the export has none: without it, a gradient was
    silently dropped). Registered once per process."""
    torch = _torch()
    name = f"{kernel.name}_{kernel.manifest['kernel_hash'][:12]}"
    qualname = f"accelopt_export::{name}"
    with kernel._lock:
        if not hasattr(torch.ops.accelopt_export, name):
            args = ", ".join(f"Tensor {n}" for n, _ in kernel.inputs)
            rets = ", ".join("Tensor" for _ in kernel.outputs)
            rets = rets if len(kernel.outputs) == 1 else f"({rets})"
            torch.library.define(qualname, f"({args}) -> {rets}", lib=_library(torch))

            def impl(*tensors: Any) -> Any:
                return kernel(*[t.contiguous() for t in tensors])

            def fake(*tensors: Any) -> Any:
                shapes = [
                    ShapeOnly(n, t.shape) for (n, _), t in zip(kernel.inputs, tensors, strict=True)
                ]
                sizes = kernel.bind_sizes(shapes, None)
                made = [tensors[0].new_empty(_dims(spec, sizes)) for _, spec in kernel.outputs]
                return made[0] if len(made) == 1 else tuple(made)

            def no_backward(ctx: Any, *grads: Any) -> Any:
                raise RuntimeError(
                    f"torch.ops.accelopt_export.{name} has no backward: accelopt exported the "
                    "kernel's forward only; differentiate the problem's PyTorch reference instead"
                )

            torch.library.impl(qualname, "cpu", lib=_library(torch))(impl)
            torch.library.register_fake(qualname, lib=_library(torch))(fake)
            torch.library.register_autograd(qualname, no_backward, lib=_library(torch))
    return getattr(torch.ops.accelopt_export, name)


_torch_library: list[Any] = []


def _library(torch: Any) -> Any:
    """This module's ``accelopt_export`` fragment library (kept alive: the ops live with it)."""
    if not _torch_library:
        _torch_library.append(torch.library.Library("accelopt_export", "FRAGMENT"))
    return _torch_library[0]
