"""An imported KernelBench problem's PyTorch form: its own ``Model``, as a KernelBench user runs
it, for the ``torch`` and ``inductor`` kinds.

The module is built once per workload (under seed 0, in float32 and training mode, as the
reference builds it) and called through ``torch.func.functional_call`` with the kernel's
parameter arguments as its floating-point state: views of the buffers, never copied. Buffers a
forward may update in place (BatchNorm's running statistics) are cloned first, so that a call
never writes its inputs.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelopt.problems.kernelbench.imported import imported_model
from accelopt.problems.kernelbench.runtime import (
    build_model,
    flatten_outputs,
    state_groups,
    torch_module,
)

Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]


class ModelForm:
    """``forward(*inputs, *parameters)`` -> the model's outputs; ``wrap`` (``torch.compile`` for
    ``inductor``) is applied to each workload's function once, when first called."""

    def __init__(self, directory: Path, wrap: Wrap) -> None:
        self._model = imported_model(directory)
        self._wrap = wrap
        self._by_shape: dict[tuple[tuple[int, ...], ...], Callable[..., Any]] = {}

    def __call__(self, *tensors: Any) -> tuple[Any, ...]:
        shapes = tuple(tuple(int(n) for n in t.shape) for t in tensors)
        if shapes not in self._by_shape:
            self._by_shape[shapes] = self._wrap(self._forward(shapes))
        return self._by_shape[shapes](*tensors)

    def _forward(self, shapes: tuple[tuple[int, ...], ...]) -> Callable[..., tuple[Any, ...]]:
        from torch.func import functional_call

        torch_module()
        ns = self._model.namespace(shapes)
        _register(ns)
        module = build_model(ns, 0)
        fixed = state_groups(module)[1]  # integer buffers keep their value
        buffers = {key for key, _ in module.named_buffers()}
        n, groups = self._model.n_inputs, self._model.groups

        def forward(*tensors: Any) -> tuple[Any, ...]:
            state = dict(fixed)
            for keys, tensor in zip(groups, tensors[n:], strict=True):
                mutable = any(key in buffers for key in keys)
                state.update(dict.fromkeys(keys, tensor.clone() if mutable else tensor))
            outputs = flatten_outputs(functional_call(module, state, tuple(tensors[:n])))
            if outputs is None:
                raise TypeError("the model's forward returned something other than tensors")
            return tuple(outputs)

        return forward


def _register(ns: dict[str, Any]) -> None:
    """The file's namespace as the module it names, for torch.compile's import of it."""
    name = ns["__name__"]
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__dict__.update(ns)
        sys.modules[name] = module
