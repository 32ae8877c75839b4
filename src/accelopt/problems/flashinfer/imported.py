"""Load a problem imported from a FlashInfer Trace dataset: its folder holds the definition as it
came (``definition.json``), its workload lines as they came (``workloads.jsonl``), the safetensors
files they read (``blob/...``), what the import worked out (``import.json``) and ``problem.py``.

Loading reads JSON only; the reference (the definition's ``run()``, in float64 on the CPU) and the
generator import torch when first called.
"""

from __future__ import annotations

import hashlib
import json
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from accelopt.problems.flashinfer.schema import Definition
from accelopt.problems.imported import (
    ImportedParts,
    check_import,
    imported_problem,
    workload_records,
)
from accelopt.problems.records import Arrays, Problem, TensorSpec

FORMAT = "flashinfer-trace/1"
DEFINITION_FILE = "definition.json"
WORKLOADS_FILE = "workloads.jsonl"
IMPORT_FILE = "import.json"
DEFAULT_TOLERANCE = 1e-4

_lock = threading.Lock()
_runs: dict[str, Callable[..., Any]] = {}


def torch_module() -> Any:
    try:
        import torch
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "a FlashInfer Trace problem's reference is PyTorch code: install torch "
            "(pip install torch) where it runs"
        ) from None
    return torch


def reference_run(text: str, filename: str) -> Callable[..., Any]:
    """The ``run`` function the reference source defines (the source runs once per content)."""
    key = hashlib.sha256(f"{filename}\0{text}".encode()).hexdigest()
    with _lock:
        if key not in _runs:
            module = types.ModuleType("accelopt_flashinfer_reference")
            module.__file__ = filename
            exec(compile(text, filename, "exec"), module.__dict__)
            run = module.__dict__.get("run")
            if not callable(run):
                raise TypeError(f"{filename}: the reference defines no function run")
            _runs[key] = run
        return _runs[key]


def output_tensors(out: Any, names: Sequence[str]) -> list[Any]:
    """run()'s result as one tensor per output, in the definition's order: as flashinfer-bench
    reads it, a tensor (one output), a tuple or list (in order), or a dict by output name."""
    if isinstance(out, Mapping):
        missing = [n for n in names if n not in out]
        if missing:
            raise TypeError(f"run() returned a dict without {', '.join(missing)}")
        return [out[n] for n in names]
    if isinstance(out, tuple | list):
        if len(out) != len(names):
            raise TypeError(f"run() returned {len(out)} values for {len(names)} outputs")
        return list(out)
    if len(names) != 1:
        raise TypeError(f"run() returned one value for {len(names)} outputs")
    return [out]


def call_reference(run: Callable[..., Any], arrays: Sequence[np.ndarray], names: Sequence[str]):
    """run() on the arrays as torch tensors of their float dtype (float64 when any is); the
    outputs as arrays of that dtype."""
    torch = torch_module()
    np_dtype = np.float64 if any(a.dtype == np.float64 for a in arrays) else np.float32
    tensors = [torch.from_numpy(np.array(a, dtype=np_dtype)) for a in arrays]
    with torch.no_grad():
        out = run(*tensors)
    return tuple(
        np.array(torch.as_tensor(t).detach().cpu().numpy(), dtype=np_dtype, copy=True)
        for t in output_tensors(out, names)
    )


def read_definition(directory: Path) -> tuple[Definition, str]:
    text = (directory / DEFINITION_FILE).read_text(encoding="utf-8")
    return Definition.model_validate_json(text), text


def load_imported(directory: Path, **overrides: Any) -> Problem:
    """The problem of an imported folder. ``matmul_flops=``, ``vector_flops=``, ``bytes=``
    (functions of the sizes) replace counted cost terms; ``tolerance=`` the relative L2 error
    allowed (1e-4 unless set)."""
    directory = Path(directory)
    meta = json.loads((directory / IMPORT_FILE).read_text(encoding="utf-8"))
    definition, _ = read_definition(directory)
    return build_problem(directory, meta, definition, directory.name, overrides)


def build_problem(
    directory: Path,
    meta: Mapping[str, Any],
    definition: Definition,
    name: str,
    overrides: Mapping[str, Any],
) -> Problem:
    again = "import the FlashInfer Trace definition again"
    check_import(directory / IMPORT_FILE, meta, overrides, FORMAT, again)
    inputs, outputs = tensor_specs(definition)
    records = workload_records(meta)
    uses_safetensors = any(d.get("safetensors") for d in records.values())
    parts = ImportedParts(
        description=definition.description or f"FlashInfer Trace definition {definition.name}.",
        inputs=inputs,
        outputs=outputs,
        reference=_reference(definition, str(directory / DEFINITION_FILE), inputs, outputs),
        generator=_generator(directory, inputs, records),
        reference_text=reference_text(definition),
        tolerance=meta.get("tolerance", DEFAULT_TOLERANCE),
        requires=("torch", "safetensors") if uses_safetensors else ("torch",),
    )
    return imported_problem(name, directory, meta, parts, overrides)


def tensor_specs(definition: Definition) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """The definition's inputs and outputs as kernel arguments, each shape in its axes."""
    inputs = tuple(TensorSpec(n, tuple(s.shape or ())) for n, s in definition.inputs.items())
    outputs = tuple(TensorSpec(n, tuple(s.shape or ())) for n, s in definition.outputs.items())
    return inputs, outputs


def _reference(
    definition: Definition,
    filename: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
) -> Callable[..., Arrays]:
    """The definition's run() as a problem's reference (the source runs on first call)."""
    output_names = [t.name for t in outputs]

    def reference(*arrays: np.ndarray) -> Arrays:
        if len(arrays) != len(inputs):
            raise TypeError(f"the reference takes {len(inputs)} arrays; got {len(arrays)}")
        run = reference_run(definition.reference, filename)
        return call_reference(run, arrays, output_names)

    return reference


def _generator(
    directory: Path, inputs: Sequence[TensorSpec], records: Mapping[str, Mapping[str, Any]]
) -> Callable[[np.random.Generator, list[tuple[int, ...]]], Arrays]:
    """The inputs of the workload whose shapes are asked for; of two workloads with the same input
    shapes, the first (in import.json's order)."""
    by_shape: dict[tuple, str] = {}
    for w, record in records.items():
        by_shape.setdefault(tuple(s.dims(record["sizes"]) for s in inputs), w)

    def generator(rng: np.random.Generator, shapes: list[tuple[int, ...]]) -> Arrays:
        """N(0, 1) float32 for a ``random`` input, as flashinfer-bench draws it (torch.randn);
        a ``safetensors`` input is read from the folder."""
        w = by_shape.get(tuple(tuple(int(n) for n in s) for s in shapes))
        stored = records[w].get("safetensors", {}) if w is not None else {}
        arrays = []
        for spec, shape in zip(inputs, shapes, strict=True):
            if spec.name in stored:
                arrays.append(read_safetensor(directory, stored[spec.name], shape))
            else:
                arrays.append(rng.standard_normal(shape, dtype=np.float32))
        return tuple(arrays)

    return generator


def read_safetensor(directory: Path, stored: Mapping[str, str], shape: Sequence[int]):
    from safetensors.numpy import load_file

    array = load_file(str(directory / stored["file"]))[stored["tensor_key"]]
    if tuple(array.shape) != tuple(shape) or array.dtype != np.float32:
        raise ValueError(
            f"{stored['file']}[{stored['tensor_key']}] holds {array.dtype} {list(array.shape)}, "
            f"not float32 {list(shape)}"
        )
    return np.ascontiguousarray(array)


def reference_text(definition: Definition) -> str:
    """What the agents are shown as the reference: the definition's run(), headed by the kernel
    arguments it maps to (run() takes the inputs and returns the outputs; it runs in float64)."""
    lines = [
        f"# FlashInfer Trace definition {definition.name} (op_type {definition.op_type}): "
        "run() below is the reference, run in float64 on the CPU.",
        "# The kernel's arguments, in order (the inputs of run(), then what it returns):",
    ]
    for role, tensors in (("input", definition.inputs), ("output", definition.outputs)):
        for n, spec in tensors.items():
            about = f": {spec.description}" if spec.description else ""
            lines.append(f"#   {n}[{', '.join(spec.shape or ())}] ({role}){about}")
    axes = ", ".join(
        f"{n}={a.value}" if a.type == "const" else f"{n} (var)" for n, a in definition.axes.items()
    )
    lines.append(f"# Axes (sizes, #define'd in a C kernel): {axes}.")
    for c in definition.constraints:
        lines.append(f"# Constraint: {c}")
    return "\n".join(lines) + "\n\n" + definition.reference.strip() + "\n"
