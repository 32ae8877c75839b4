"""Run a KernelBench file on one set of sizes and check what accelopt needs of it: float32 tensor
inputs and outputs, shapes that do not depend on the data, a deterministic float64 forward.

A run on the meta device gives shapes and counted costs without memory; a failure there is not a
refusal (the caller falls back to real tensors when they fit). A run on real tensors refuses.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

import accelopt.problems.kernelbench.runtime as runtime
from accelopt.problems.kernelbench.costs import Counts, count_forward
from accelopt.problems.kernelbench.source import (
    ImportRefused,
    Source,
    execute,
    gpu_refusal,
    integer_constants,
    mentions_gpu,
    short_error,
)

Shape = tuple[int, ...]


@dataclass
class Run:
    """One run of the file: the integer constants, the argument shapes (inputs, floating-point
    state, outputs) and, where counted, the costs. ``outputs`` is None when forward failed on the
    meta device (``error`` says why)."""

    constants: dict[str, int]
    ns: dict[str, Any]
    input_names: list[str]
    inputs: list[Shape]
    groups: list[tuple[tuple[str, ...], Shape]]
    outputs: list[Shape] | None
    tuple_output: bool = False
    counts: Counts | None = None
    error: str = ""
    tensors: tuple[list[Any], list[Any], list[Any]] | None = None  # real runs: in, state, out

    @property
    def shapes(self) -> list[Shape]:
        return [*self.inputs, *(s for _, s in self.groups), *(self.outputs or [])]

    def structure(self) -> tuple[Any, ...]:
        """What must agree between workloads: counts, ranks and parameter keys."""
        outs = None if self.outputs is None else [len(s) for s in self.outputs]
        return ([len(s) for s in self.inputs], [(k, len(s)) for k, s in self.groups], outs)

    @property
    def args_bytes32(self) -> int:
        return 4 * sum(math.prod(s) for s in self.shapes)


class MetaFailed(Exception):
    """The meta device could not run the file (a data-dependent op, an explicit device...)."""


def _fail(source: Source, what: str, exc: BaseException, device: str | None) -> Exception:
    if mentions_gpu(exc):
        return gpu_refusal(source.filename, exc)
    if device == "meta":
        return MetaFailed(f"{what} fails on the meta device ({short_error(exc)})")
    return ImportRefused(f"{what} of {source.filename} fails: {short_error(exc)}")


def _check_device(source: Source, what: str, t: Any, device: str | None) -> None:
    kind = t.device.type
    if kind in ("cuda", "hip", "xpu", "mps"):
        raise ImportRefused(
            f"{source.filename} needs a GPU ({what} is on {kind}); accelopt runs an imported "
            "problem's reference on the CPU"
        )
    if kind != (device or "cpu"):
        raise MetaFailed(f"{what} is created on {kind}, not on the meta device")


def run_on(
    source: Source,
    overrides: Mapping[str, int],
    device: str | None,
    *,
    seed: int = 0,
    count: bool = True,
    ns: dict[str, Any] | None = None,
    forward: bool = True,
) -> Run:
    """Run the file with the constants overridden, on ``device`` ("meta", or None: real CPU
    tensors). Raises ImportRefused for what no device can fix, MetaFailed on the meta device.
    ``forward=False``: build the model and the inputs only (``outputs`` stays None)."""
    runtime.torch_module()  # first: a clear message when torch is missing
    ns = ns if ns is not None else execute(source, overrides)
    run, model, (inputs, state) = _set_up(source, ns, seed, device)
    if not forward:
        run.tensors = (inputs, state, [])
        return run
    try:
        out = _forward(model, inputs, run, count)
    except Exception as exc:
        failure = _fail(source, "forward", exc, device)
        if isinstance(failure, MetaFailed):
            run.error = str(failure)
            return run
        raise failure from None
    outs = _checked_outputs(source, out, run, device)
    run.outputs = [tuple(t.shape) for t in outs]
    if device is None:
        run.tensors = (inputs, state, outs)
    return run


def _set_up(
    source: Source, ns: dict[str, Any], seed: int, device: str | None
) -> tuple[Run, Any, tuple[list[Any], list[Any]]]:
    """Build the model and its inputs on ``device`` and check them: the run without outputs, the
    model, and its input and state tensors."""
    constants = integer_constants(source, ns)
    try:
        model = runtime.build_model(ns, seed, device)
    except Exception as exc:
        raise _fail(source, "Model(*get_init_inputs())", exc, device) from None
    try:
        inputs = runtime.make_inputs(ns, seed, device)
    except Exception as exc:
        raise _fail(source, "get_inputs()", exc, device) from None
    names = runtime.forward_names(model, len(inputs))
    _check_inputs(source, names, inputs, device)
    groups = runtime.state_groups(model)[0]
    for keys, t in groups:
        _check_device(source, f"parameter {keys[0]!r}", t, device)
    run = Run(constants, ns, names, [tuple(t.shape) for t in inputs], [], None)
    run.groups = [(keys, tuple(t.shape)) for keys, t in groups]
    return run, model, (inputs, [t for _, t in groups])


def _check_inputs(source: Source, names: list[str], inputs: list[Any], device: str | None) -> None:
    torch = runtime.torch_module()
    for name, t in zip(names, inputs, strict=True):
        if not isinstance(t, torch.Tensor):
            raise ImportRefused(
                f"input {name!r} of {source.filename} is a {type(t).__name__}, not a tensor; "
                "accelopt kernels take float32 tensors only"
            )
        if t.dtype != torch.float32:
            raise ImportRefused(
                f"input {name!r} of {source.filename} is {t.dtype}; accelopt kernels take "
                "float32 tensors only"
            )
        _check_device(source, f"input {name!r}", t, device)


def _forward(model: Any, inputs: list[Any], run: Run, count: bool) -> Any:
    """The model's forward on ``inputs``; with ``count``, its costs go to ``run.counts``."""
    if count:
        out, run.counts = count_forward(model, inputs)
        return out
    return runtime.forward(model, inputs)


def _checked_outputs(source: Source, out: Any, run: Run, device: str | None) -> list[Any]:
    """Forward's result as a list of float32 tensors on ``device`` (``run.tuple_output`` says
    whether it was a tuple), or ImportRefused."""
    torch = runtime.torch_module()
    outs = runtime.flatten_outputs(out)
    if outs is None:
        raise ImportRefused(
            f"forward of {source.filename} returns a {type(out).__name__}; accelopt kernels "
            "write float32 tensors only (forward must return a tensor or a tuple of tensors)"
        )
    run.tuple_output = not isinstance(out, torch.Tensor)
    for i, t in enumerate(outs):
        label = f"output {i}" if run.tuple_output else "the output"
        if t.dtype != torch.float32:
            raise ImportRefused(
                f"{label} of {source.filename} is {t.dtype}; accelopt kernels write float32 "
                "tensors only"
            )
        _check_device(source, label, t, device)
    return outs


def _arrays(tensors: list[Any]) -> list[np.ndarray]:
    return [np.array(t.detach().float().contiguous().numpy(), dtype=np.float32) for t in tensors]


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a64.shape != b64.shape:
        return math.inf
    norm = float(np.linalg.norm(b64))
    diff = float(np.linalg.norm(a64 - b64))
    if math.isnan(diff):
        return 0.0 if np.array_equal(a64, b64, equal_nan=True) else math.inf
    return diff / norm if norm > 0 else diff


@dataclass
class RealCheck:
    run: Run
    seconds: float  # the float64 forward
    fp32_error: float  # PyTorch's float32 forward against the float64 reference (max over outputs)
    zero_outputs: tuple[int, ...] = ()  # outputs that are all zeros


def real_check(
    source: Source, overrides: Mapping[str, int], *, count: bool, time_limit: float
) -> RealCheck:
    """Time the float64 reference on real tensors, then run the file under two seeds and the
    reference again; refuses data-dependent shapes and random outputs. Stops after the first
    float64 forward when it takes over ``time_limit`` seconds (``fp32_error`` is NaN then, and
    ``run`` has no outputs)."""
    torch = runtime.torch_module()
    ns = execute(source, overrides)
    bare = run_on(source, overrides, None, seed=0, ns=ns, forward=False)
    assert bare.tensors is not None
    inputs, state, _ = bare.tensors
    arrays = [a.astype(np.float64) for a in _arrays(inputs) + _arrays(state)]
    reference = runtime.Reference(ns, len(inputs), [k for k, _ in bare.groups])
    try:
        reference.model(torch.float64)
        start = time.perf_counter()
        once = reference(*arrays)
        seconds = time.perf_counter() - start
    except Exception as exc:
        run_on(source, overrides, None, seed=0, count=False, ns=ns)  # a precise refusal, if any
        raise _float64_refusal(source, exc) from None
    if seconds > time_limit:
        return RealCheck(bare, seconds, math.nan)
    first = run_on(source, overrides, None, seed=0, count=count, ns=ns)
    second = run_on(source, overrides, None, seed=1, count=False, ns=ns)
    if first.shapes != second.shapes:
        i = next(
            i for i, (a, b) in enumerate(zip(first.shapes, second.shapes, strict=False)) if a != b
        )
        n_in, n_par = len(first.inputs), len(first.groups)
        what = (
            f"input {first.input_names[i]!r}"
            if i < n_in
            else f"parameter {first.groups[i - n_in][0][0]!r}"
            if i < n_in + n_par
            else f"output {i - n_in - n_par}"
        )
        raise ImportRefused(
            f"the shapes of {source.filename} depend on the data ({what} is "
            f"{first.shapes[i]} with one seed, {second.shapes[i]} with another); accelopt "
            "kernels take and write tensors of fixed shapes"
        )
    try:
        again = reference(*arrays)
    except Exception as exc:
        raise _float64_refusal(source, exc) from None
    for i, (a, b) in enumerate(zip(once, again, strict=True)):
        if rel_l2(a, b) > 1e-12:
            label = f"output {i}" if first.tuple_output else "the output"
            raise ImportRefused(
                f"{label} of {source.filename} is random (two float64 runs on the same inputs "
                "and parameters differ, as with dropout); accelopt needs a deterministic "
                "reference"
            )
    assert first.tensors is not None
    outs = _arrays(first.tensors[2])
    error = max(rel_l2(a, b) for a, b in zip(outs, once, strict=True))
    zeros = tuple(i for i, a in enumerate(once) if not np.any(a))
    return RealCheck(first, seconds, error, zeros)


def _float64_refusal(source: Source, exc: BaseException) -> ImportRefused:
    if mentions_gpu(exc):
        return gpu_refusal(source.filename, exc)
    return ImportRefused(
        f"the float64 forward of {source.filename} fails ({short_error(exc)}); accelopt checks "
        "kernels against the model run in float64"
    )
