"""Run a KernelBench model the way accelopt needs it: build it under a seed, split its state into
kernel arguments, and evaluate it in float64 on arrays (the reference). torch is imported inside
the functions only."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def torch_module() -> Any:
    try:
        import torch
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "a KernelBench problem's reference is a PyTorch model: install torch "
            "(pip install torch) where it runs"
        ) from None
    return torch


@contextlib.contextmanager
def seeded(seed: int, device: str | None = None) -> Iterator[None]:
    """torch's CPU generator seeded (and restored afterwards); factory functions on ``device``."""
    torch = torch_module()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if device is None:
            yield
        else:
            with torch.device(device):
                yield


def make_inputs(ns: Mapping[str, Any], seed: int, device: str | None = None) -> list[Any]:
    with seeded(seed, device):
        inputs = ns["get_inputs"]()
    return list(inputs) if isinstance(inputs, list | tuple) else [inputs]


def build_model(ns: Mapping[str, Any], seed: int, device: str | None = None) -> Any:
    with seeded(seed, device):
        return ns["Model"](*ns["get_init_inputs"]())


def forward(model: Any, inputs: Sequence[Any]) -> Any:
    torch = torch_module()
    with torch.no_grad():
        return model(*inputs)


def forward_names(model: Any, count: int) -> list[str]:
    """Names of forward's first ``count`` positional parameters; ``in<i>`` where ``*args`` (or
    nothing) covers position i."""
    names: list[str] = []
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        else:
            break
    return [names[i] if i < len(names) else f"in{i}" for i in range(count)]


def state_groups(model: Any) -> tuple[list[tuple[tuple[str, ...], Any]], dict[str, Any]]:
    """The model's floating-point state_dict entries as (keys, tensor) in state_dict order (tied
    tensors share one entry), and its other entries (integer buffers) by key."""
    floats: list[tuple[list[str], Any]] = []
    seen: dict[int, int] = {}
    others: dict[str, Any] = {}
    for key, tensor in model.state_dict(keep_vars=True).items():
        if tensor.is_floating_point():
            if id(tensor) in seen:
                floats[seen[id(tensor)]][0].append(key)
            else:
                seen[id(tensor)] = len(floats)
                floats.append(([key], tensor))
        else:
            others[key] = tensor.detach().clone()
    return [(tuple(keys), t) for keys, t in floats], others


def flatten_outputs(out: Any) -> list[Any] | None:
    """The output tensors of forward, or None when it returns anything but a tensor or a flat
    tuple/list of tensors."""
    torch = torch_module()
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, tuple | list) and out and all(isinstance(t, torch.Tensor) for t in out):
        return list(out)
    return None


@contextlib.contextmanager
def default_dtype(dtype: Any) -> Iterator[None]:
    torch = torch_module()
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


@dataclass
class Reference:
    """The model of one workload, evaluated on arrays: inputs (get_inputs order) then the
    floating-point state (``groups``: the state_dict keys of each); integer buffers keep their
    value at construction. Built under seed 0 in training mode, as KernelBench runs it."""

    ns: Mapping[str, Any]
    n_inputs: int
    groups: Sequence[Sequence[str]]

    def __post_init__(self) -> None:
        self._models: dict[Any, Any] = {}
        self._others: dict[str, Any] = {}

    def model(self, dtype: Any) -> Any:
        """The model in ``dtype`` (built on first use)."""
        if dtype not in self._models:
            model = build_model(self.ns, 0)
            self._others = state_groups(model)[1]
            self._models[dtype] = model.to(dtype)
        return self._models[dtype]

    def __call__(self, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        torch = torch_module()
        np_dtype = np.float64 if any(a.dtype == np.float64 for a in arrays) else np.float32
        dtype = torch.float64 if np_dtype == np.float64 else torch.float32
        n = self.n_inputs
        if len(arrays) != n + len(self.groups):
            raise TypeError(
                f"the reference takes {n + len(self.groups)} arrays "
                f"({n} inputs, {len(self.groups)} parameters); got {len(arrays)}"
            )
        model = self.model(dtype)
        tensors = [torch.from_numpy(np.array(a, dtype=np_dtype)) for a in arrays]
        state = {k: v.clone() for k, v in self._others.items()}
        for keys, tensor in zip(self.groups, tensors[n:], strict=True):
            state.update(dict.fromkeys(keys, tensor))
        model.load_state_dict(state)
        with default_dtype(dtype):
            out = forward(model, tensors[:n])
        outs = flatten_outputs(out)
        if outs is None:
            raise TypeError(f"forward returned {type(out).__name__}, not float tensors")
        return tuple(
            np.array(t.detach().to("cpu", dtype).contiguous().numpy(), dtype=np_dtype, copy=True)
            for t in outs
        )


def is_mask(array: np.ndarray) -> bool:
    """Zeros and ones, both present: a mask (a causal ``bias`` buffer), not a value."""
    a = np.asarray(array)
    return bool(a.size) and bool(np.all((a == 0) | (a == 1))) and 0 < np.count_nonzero(a) < a.size


def perturb(array: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A parameter moved off its initial value, so a kernel cannot assume a LayerNorm weight of
    exactly 1 or a bias of 0: an all-positive tensor times exp(0.2 N(0,1)) stays positive,
    anything else gets 0.1 * scale * N(0,1), scale its standard deviation (1 when 0)."""
    a = np.asarray(array, dtype=np.float64)
    noise = rng.standard_normal(a.shape)
    if a.size and np.all(a > 0):
        return a * np.exp(0.2 * noise)
    scale = float(np.std(a)) if a.size else 0.0
    return a + 0.1 * (scale if scale > 0 else 1.0) * noise


def generate(
    ns: Mapping[str, Any], n_inputs: int, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """Inputs from get_inputs() and parameters from the module's own initialization (perturbed;
    a buffer that is a 0/1 mask is kept), under a torch seed drawn from ``rng``."""
    seed = int(rng.integers(0, 2**63 - 1))
    inputs = make_inputs(ns, seed)
    model = build_model(ns, seed)
    groups = state_groups(model)[0]
    buffers = {key for key, _ in model.named_buffers()}
    arrays = [t.detach().to("cpu").float().contiguous().numpy() for t in inputs[:n_inputs]]
    for keys, t in groups:
        value = t.detach().to("cpu").double().numpy()
        keep = keys[0] in buffers and is_mask(value)
        arrays.append(value if keep else perturb(value, rng))
    return tuple(np.ascontiguousarray(a, dtype=np.float32) for a in arrays)
