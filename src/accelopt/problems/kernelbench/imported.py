"""Load an imported KernelBench problem from its folder (``model.py``, ``import.json``,
``problem.py``). Loading reads JSON only; the reference and the generator import torch when first
called, and run ``model.py`` with the constants of the workload their arrays belong to."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from accelopt.problems.imported import ImportedParts, check_import, imported_problem
from accelopt.problems.records import Arrays, Problem, TensorSpec

FORMAT = 1

_lock = threading.RLock()
_namespaces: dict[tuple[Any, ...], dict[str, Any]] = {}
_references: dict[tuple[Any, ...], Any] = {}


def load_imported(directory: Path, **overrides: Any) -> Problem:
    """The problem of an imported folder. ``matmul_flops=``, ``vector_flops=``, ``bytes=``
    (functions of the sizes) replace counted cost terms; ``tolerance=`` the relative L2 error
    allowed."""
    directory = Path(directory)
    meta = json.loads((directory / "import.json").read_text(encoding="utf-8"))
    text = (directory / "model.py").read_text(encoding="utf-8")
    return build_problem(directory, meta, text, directory.name, overrides)


def _namespace(text: str, filename: str, constants: Mapping[str, int]) -> dict[str, Any]:
    from accelopt.problems.kernelbench.runtime import torch_module
    from accelopt.problems.kernelbench.source import execute, parse

    torch_module()  # a clear message when torch is missing
    key = (hashlib.sha256(text.encode()).hexdigest(), filename, tuple(sorted(constants.items())))
    with _lock:
        if key not in _namespaces:
            _namespaces[key] = execute(parse(text, filename), constants)
        return _namespaces[key]


def build_problem(
    directory: Path, meta: Mapping[str, Any], text: str, name: str, overrides: Mapping[str, Any]
) -> Problem:
    again = "import the KernelBench file again"
    check_import(directory / "import.json", meta, overrides, FORMAT, again)
    args = meta["arguments"]
    inputs = tuple(TensorSpec(a["name"], tuple(a["shape"])) for a in args if a["role"] != "output")
    outputs = tuple(TensorSpec(a["name"], tuple(a["shape"])) for a in args if a["role"] == "output")
    model = _model(meta, text, name, inputs)
    parts = ImportedParts(
        description=meta["description"],
        inputs=inputs,
        outputs=outputs,
        reference=model.reference,
        generator=model.generate,
        reference_text=reference_text(meta, text),
        tolerance=meta["tolerance"],
    )
    return imported_problem(name, directory, meta, parts, overrides)


def _model(meta: Mapping[str, Any], text: str, name: str, inputs: Sequence[TensorSpec]) -> _Model:
    args, records = meta["arguments"], meta["workloads"]
    return _Model(
        name=name,
        filename=meta["file"],
        text=text,
        n_inputs=sum(a["role"] == "input" for a in args),
        groups=[tuple(a["keys"]) for a in args if a["role"] == "parameter"],
        constants={w: dict(d["constants"]) for w, d in records.items()},
        by_shape={tuple(s.dims(d["sizes"]) for s in inputs): w for w, d in records.items()},
    )


def imported_model(directory: Path) -> _Model:
    """The model of an imported folder, as its reference and its PyTorch form run it."""
    directory = Path(directory)
    meta = json.loads((directory / "import.json").read_text(encoding="utf-8"))
    text = (directory / "model.py").read_text(encoding="utf-8")
    inputs = [TensorSpec(a["name"], tuple(a["shape"])) for a in meta["arguments"]]
    inputs = [s for s, a in zip(inputs, meta["arguments"], strict=True) if a["role"] != "output"]
    return _model(meta, text, directory.name, inputs)


@dataclass(frozen=True)
class _Model:
    """``model.py`` as the reference and the generator run it: with the constants of the workload
    whose input shapes they are given (an imported problem runs on its own workloads only)."""

    name: str  # the problem's
    filename: str  # the KernelBench file's
    text: str
    n_inputs: int
    groups: list[tuple[str, ...]]  # the state_dict keys of each parameter argument
    constants: dict[str, dict[str, int]]  # by workload
    by_shape: dict[tuple[tuple[int, ...], ...], str]  # the workload of each set of input shapes

    def namespace(self, shapes: Sequence[Sequence[int]]) -> dict[str, Any]:
        key = tuple(tuple(int(n) for n in s) for s in shapes)
        if key not in self.by_shape:
            known = "; ".join(f"{w}: {list(s)}" for s, w in self.by_shape.items())
            raise ValueError(
                f"problem {self.name!r}: input shapes {list(key)} are those of no workload "
                f"({known}); an imported problem runs on its own workloads only"
            )
        return _namespace(self.text, self.filename, self.constants[self.by_shape[key]])

    def reference(self, *arrays: np.ndarray) -> Arrays:
        from accelopt.problems.kernelbench.runtime import Reference

        ns = self.namespace([a.shape for a in arrays])
        key = (id(ns), tuple(self.groups), self.n_inputs)
        with _lock:
            if key not in _references:
                _references[key] = Reference(ns, self.n_inputs, self.groups)
            return _references[key](*arrays)

    def generate(self, rng: np.random.Generator, shapes: list[tuple[int, ...]]) -> Arrays:
        from accelopt.problems.kernelbench.runtime import generate

        ns = self.namespace(shapes)
        with _lock:
            arrays = generate(ns, self.n_inputs, rng)
        got = [tuple(a.shape) for a in arrays]
        if got != [tuple(s) for s in shapes]:
            raise ValueError(
                f"problem {self.name!r}: {self.filename} now makes inputs of shapes {got}, not "
                f"{shapes}: import it again"
            )
        return arrays


def reference_text(meta: Mapping[str, Any], text: str) -> str:
    """What the agents are shown as the reference: the KernelBench file, headed by where each
    kernel argument comes from (the model runs in float64 with the parameters it is given)."""
    lines = [
        f"# KernelBench {meta['file']}, run in float64 with the kernel's own parameters.",
        "# The kernel's arguments, in order (inputs, parameters, outputs):",
    ]
    for a in meta["arguments"]:
        shape = ", ".join(a["shape"])
        lines.append(f"#   {a['name']}[{shape}] ({a['role']}): {a.get('origin', '')}".rstrip())
    lines.append("# The size constants below take the workload's values (see Sizes).")
    return "\n".join(lines) + "\n\n" + text.strip() + "\n"
