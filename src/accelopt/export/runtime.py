"""The runtime of an exported kernel: validate the caller's arrays, route by size, call the object.

``accelopt export`` copies this file and the two beside it (``runtime_build.py``: building for
new sizes; ``runtime_torch.py``: tensors, Triton, the torch op) into the folder it writes, under
``_accelopt/``: it needs only the standard library and NumPy (torch for tensors, Triton for a
triton kernel), never accelopt. The folder's ``manifest.json`` says what the kernel computes, which
objects were built for which sizes, and how to build one for new sizes.

The kernel is usually LLM-written code (``manifest.json``'s ``author`` says who wrote it). Here
it runs in the caller's process, without the sandbox that evaluated it: that is why ``accelopt
export`` exports only a kernel that passed, and why the first call at sizes nobody checked is
verified against the reference by default.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import json
import math
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

MANIFEST = "manifest.json"
TRITON_MODULE = "triton-module"  # the manifest's loader of a Triton module (else a C shared object)
ALIGN = 64  # bytes: the kernel contract's alignment (aligned vector loads are legal)
POLICIES = ("compile", "reference", "raise")


class KernelMismatchError(RuntimeError):
    """The kernel built for new sizes disagrees with the reference on its first call."""


def aligned(array: Any) -> np.ndarray:
    """A float32, C-contiguous, 64-byte aligned copy of ``array``: what the kernel reads."""
    source = np.asarray(array, dtype=np.float32)
    out = aligned_empty(source.shape)
    out[...] = source
    return out


def aligned_empty(shape: Sequence[int]) -> np.ndarray:
    """An uninitialized float32 array, C-contiguous and 64-byte aligned."""
    count = math.prod(shape)
    raw = np.empty(4 * count + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start : start + 4 * count].view(np.float32).reshape(tuple(shape))


class Argument:
    """One of the caller's arrays, seen as NumPy (a CPU torch tensor shares its memory)."""

    def __init__(self, name: str, value: Any) -> None:
        self.name = name
        self.tensor = _is_tensor(value)
        if self.tensor:
            if value.device.type != "cpu":
                raise ValueError(f"{name} is on {value.device}; this kernel takes CPU tensors")
            if value.requires_grad:
                value = value.detach()
            self.array = value.numpy() if value.dtype == _torch().float32 else None
            self.dtype = str(value.dtype).replace("torch.", "")
        elif isinstance(value, np.ndarray):
            self.array = value if value.dtype == np.float32 else None
            self.dtype = str(value.dtype)
        else:
            raise ValueError(f"{name} must be a NumPy array or a torch tensor, not {type(value)}")
        if self.array is None:
            raise ValueError(f"{name} has dtype {self.dtype}; this kernel takes float32")
        if not self.array.flags.c_contiguous:
            raise ValueError(
                f"{name} is not C-contiguous; pass np.ascontiguousarray({name}) "
                f"(or {name}.contiguous() for a tensor)"
            )

    @property
    def is_aligned(self) -> bool:
        return self.array.ctypes.data % ALIGN == 0


def _is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _torch() -> Any:
    import torch

    return torch


class ExportedKernel:
    """The kernel of an export folder, called with the problem's arguments.

    ``policy`` for sizes no object was exported for: ``compile`` (build one on first use; the
    sizes are macros, so any sizes build), ``reference`` (run the reference instead) or
    ``raise``. ``verify``: check the first call at new sizes against the reference."""

    def __init__(self, folder: Path, reference: Callable[..., Any] | None = None) -> None:
        self.folder = Path(folder)
        self.manifest = json.loads((self.folder / MANIFEST).read_text(encoding="utf-8"))
        m = self.manifest
        self.name: str = m["problem"]
        self.params: list[str] = list(m["params"])
        self.inputs: list[tuple[str, list[str]]] = [(t["name"], t["shape"]) for t in m["inputs"]]
        self.outputs: list[tuple[str, list[str]]] = [(t["name"], t["shape"]) for t in m["outputs"]]
        self.tolerance = float(m["tolerance"])
        self.policy = m.get("default_policy", "compile")
        self.verify = True
        self._reference = reference
        self._lock = threading.RLock()
        self._callables: dict[tuple[int, ...], Callable[..., None]] = {}
        self._checked: set[tuple[int, ...]] = set()
        self._known: dict[tuple[int, ...], dict[str, Any] | None] = {}  # exported(), by sizes
        self._libraries: list[Any] = []  # keeps every loaded object alive

    def set_policy(self, policy: str, verify: bool = True) -> None:
        """What a call at sizes nobody exported does (``compile``, ``reference``, ``raise``)."""
        self.policy = _checked_policy(policy)
        self.verify = bool(verify)

    def __call__(
        self,
        *values: Any,
        out: Any = None,
        policy: str | None = None,
        verify: bool | None = None,
        reference: Callable[..., Any] | None = None,
    ) -> Any:
        names = [n for n, _ in self.inputs]
        if len(values) != len(names):
            raise TypeError(f"{self.name}() takes {len(names)} arrays ({', '.join(names)})")
        if self.manifest["loader"] == TRITON_MODULE:
            return _sibling("runtime_torch").call_triton(
                self, values, out, policy, verify, reference
            )
        args = [Argument(n, v) for n, v in zip(names, values, strict=True)]
        outs = self._out_arguments(out)
        sizes = self.bind_sizes(args, outs)
        for o, (name, _) in zip(outs or [], self.outputs, strict=False):
            for a in args:
                if np.may_share_memory(o.array, a.array):
                    raise ValueError(
                        f"out ({name}) overlaps {a.name}: the kernel reads its inputs while it "
                        "writes its outputs, so they may not share memory"
                    )
        if outs is None:
            outs = self._new_outputs(sizes, any(a.tensor for a in args))
        arrays = [a.array if a.is_aligned else aligned(a.array) for a in args]
        self._run(sizes, arrays, [o.array for o in outs], policy, verify, reference)
        results = [
            (_torch().from_numpy(o.array) if o.tensor and out is None else o.value) for o in outs
        ]
        return results[0] if len(results) == 1 else tuple(results)

    def _out_arguments(self, out: Any) -> list[_Output] | None:
        if out is None:
            return None
        values = list(out) if isinstance(out, tuple | list) else [out]
        if len(values) != len(self.outputs):
            raise ValueError(f"out= takes {len(self.outputs)} arrays, got {len(values)}")
        found = []
        for (name, _), value in zip(self.outputs, values, strict=True):
            arg = Argument(f"out ({name})", value)
            if not arg.is_aligned:
                raise ValueError(
                    f"out ({name}) is not 64-byte aligned (its address mod 64 is "
                    f"{arg.array.ctypes.data % ALIGN}): allocate it with aligned_empty(shape)"
                )
            if not arg.array.flags.writeable:
                raise ValueError(f"out ({name}) is read-only")
            found.append(_Output(arg.array, value, arg.tensor))
        return found

    def bind_sizes(
        self, args: Sequence[Argument], outs: Sequence[_Output] | None
    ) -> dict[str, int]:
        """The size parameters the arrays' shapes spell; a ValueError where they disagree."""
        sizes: dict[str, int] = {}
        pairs = [(a.name, a.array.shape, s) for a, (_, s) in zip(args, self.inputs, strict=True)]
        if outs is not None:
            pairs += [
                (f"out ({n})", o.array.shape, s)
                for o, (n, s) in zip(outs, self.outputs, strict=True)
            ]
        for name, shape, spec in pairs:
            if len(shape) != len(spec):
                raise ValueError(
                    f"{name} has shape {tuple(shape)}; expected {len(spec)} axes "
                    f"[{', '.join(spec)}]"
                )
            for axis, (got, want) in enumerate(zip(shape, spec, strict=True)):
                expected = int(want) if want.isdigit() else sizes.setdefault(want, int(got))
                if got != expected:
                    raise ValueError(
                        f"{name} has shape {tuple(shape)}: axis {axis} is {got}, but "
                        f"{want} = {expected}"
                        + ("" if want.isdigit() else " from the arrays before it")
                    )
        missing = [p for p in self.params if p not in sizes]
        if missing:
            raise ValueError(f"{', '.join(missing)} not given by the inputs' shapes: pass out=")
        if any(v <= 0 for v in sizes.values()):
            raise ValueError(f"sizes must be positive: {sizes}")
        return sizes

    def _new_outputs(self, sizes: dict[str, int], tensor: bool) -> list[_Output]:
        made = []
        for _, spec in self.outputs:
            shape = tuple(int(d) if d.isdigit() else sizes[d] for d in spec)
            array = aligned_empty(shape)
            made.append(_Output(array, array, tensor))
        return made

    # -- routing ---------------------------------------------------------------------------------
    def _run(
        self,
        sizes: dict[str, int],
        inputs: list[np.ndarray],
        outputs: list[np.ndarray],
        policy: str | None,
        verify: bool | None,
        reference: Callable[..., Any] | None,
    ) -> None:
        key = tuple(sizes[p] for p in self.params)
        policy = _checked_policy(policy or self.policy)
        verify = self.verify if verify is None else verify
        with self._lock:
            known = self._known[key] if key in self._known else self.exported(key)
            self._known[key] = known
            if key not in self._callables:
                if known is None and policy == "raise":
                    raise ValueError(
                        f"{self.name} was exported for {self.exported_sizes()}, not "
                        f"{_sizes_text(self.params, key)}; call with policy='compile' or "
                        "policy='reference'"
                    )
                if known is None and policy == "reference":
                    _write(outputs, self._reference_outputs(inputs, reference))
                    return
                self._callables[key] = self._load(key, known)
            fn = self._callables[key]
            first = key not in self._checked
        fn(inputs, outputs)
        if first:
            if verify and not (known is not None and known["built_here"]):
                self._verify(key, inputs, outputs, reference)
            with self._lock:
                self._checked.add(key)

    def exported(self, key: tuple[int, ...]) -> dict[str, Any] | None:
        """The exported object for these sizes, with ``built_here`` when it may be loaded as is."""
        for variant in self.manifest["variants"]:
            if tuple(variant["sizes"][p] for p in self.params) == key:
                if self.manifest["loader"] == TRITON_MODULE:  # one module, any sizes: Triton JITs
                    return {**variant, "built_here": True}
                ok = self.built_here and bool(variant.get("object"))
                return {**variant, "built_here": ok}
        return None

    @functools.cached_property
    def built_here(self) -> bool:
        """Whether the exported objects were built on a machine like this one (read once)."""
        return self.manifest.get("machine") == _sibling("runtime_build").machine_fingerprint()

    def exported_sizes(self) -> str:
        return "; ".join(
            f"{v['workload']} ({_sizes_text(self.params, [v['sizes'][p] for p in self.params])})"
            for v in self.manifest["variants"]
        )

    def _verify(
        self,
        key: tuple[int, ...],
        inputs: list[np.ndarray],
        outputs: list[np.ndarray],
        reference: Callable[..., Any] | None,
    ) -> None:
        expected = self._reference_outputs(inputs, reference, np.float64)
        for (name, _), got, want in zip(self.outputs, outputs, expected, strict=True):
            error = relative_error(_as_numpy(got), want)
            if not error <= self.tolerance:
                with self._lock:
                    self._callables.pop(key, None)
                raise KernelMismatchError(
                    f"{self.name} at {_sizes_text(self.params, key)}: output {name} differs from "
                    f"the reference (relative L2 error {error:.3g} > {self.tolerance:.3g}); the "
                    "kernel is not used at these sizes: call with policy='reference'"
                )

    def _reference_outputs(
        self,
        inputs: list[np.ndarray],
        reference: Callable[..., Any] | None,
        dtype: Any = np.float32,
    ) -> list[np.ndarray]:
        fn = reference or self._reference or self._load_reference()
        found = fn(*[np.asarray(_as_numpy(a), dtype=dtype) for a in inputs])
        found = found if isinstance(found, tuple | list) else (found,)
        return [np.asarray(_as_numpy(a), dtype=dtype) for a in found]

    def _load_reference(self) -> Callable[..., Any]:
        path = self.folder / "reference.py"
        if not self.manifest.get("reference") or not path.is_file():
            raise ValueError(
                f"this export of {self.name} has no standalone reference ({path.name}): call "
                "with verify=False, or policy='raise'"
            )
        module = import_file(path, f"_accelopt_reference_{self.manifest['kernel_hash'][:12]}")
        self._reference = module.reference
        return module.reference

    def _load(self, key: tuple[int, ...], known: dict[str, Any] | None) -> Callable[..., None]:
        if self.manifest["loader"] == TRITON_MODULE:
            return _sibling("runtime_torch").triton_callable(self)
        if known is not None and known["built_here"]:
            path = self.folder / known["object"]
        else:
            path = _sibling("runtime_build").build_object(self, key)
        library = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
        self._libraries.append(library)
        entry = getattr(library, self.manifest.get("symbol") or "kernel")  # kernel.h's name
        entry.restype = None
        entry.argtypes = [ctypes.c_void_p] * (len(self.inputs) + len(self.outputs))

        def call(inputs: list[np.ndarray], outputs: list[np.ndarray]) -> None:
            entry(*[a.ctypes.data for a in (*inputs, *outputs)])

        return call

    def torch_op(self) -> Any:
        """The kernel as a ``torch.library`` custom op (CPU), opaque to ``torch.compile``:
        ``torch.ops.accelopt_export.<problem>_<hash>``. Registered once per process."""
        return _sibling("runtime_torch").torch_op(self)


class _Output:
    def __init__(self, array: np.ndarray, value: Any, tensor: bool) -> None:
        self.array, self.value, self.tensor = array, value, tensor


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """Relative L2 error in float64; inf where ``got`` holds NaN or Inf."""
    got64 = np.asarray(got, dtype=np.float64)
    want64 = np.asarray(want, dtype=np.float64)
    if got64.shape != want64.shape or not np.all(np.isfinite(got64)):
        return math.inf
    norm = float(np.linalg.norm(want64))
    diff = float(np.linalg.norm(got64 - want64))
    return diff / norm if norm > 0 else diff


def _write(outputs: list[Any], values: list[np.ndarray]) -> None:
    for target, value in zip(outputs, values, strict=True):
        if _is_tensor(target):
            target.copy_(_torch().from_numpy(np.ascontiguousarray(value)))
        else:
            target[...] = value


def _as_numpy(value: Any) -> Any:
    return value.detach().cpu().numpy() if _is_tensor(value) else value


def _checked_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    return policy


def _sizes_text(params: Sequence[str], values: Sequence[int]) -> str:
    return ", ".join(f"{p}={v}" for p, v in zip(params, values, strict=True))


def _sibling(name: str) -> Any:
    """``runtime_build.py`` or ``runtime_torch.py``, the files beside this one (in the package and
    in an export folder's ``_accelopt/``), imported on first use."""
    return import_file(Path(__file__).with_name(f"{name}.py"), f"{__name__}__{name}")


def import_file(path: Path, name: str) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
