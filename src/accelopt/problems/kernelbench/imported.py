"""Load an imported KernelBench problem from its folder (``model.py``, ``import.json``,
``problem.py``). Loading reads JSON only; the reference and the generator import torch when first
called, and run ``model.py`` with the constants of the workload their arrays belong to."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from accelopt.problems.imports import check_overrides, counted_cost_model
from accelopt.problems.records import Arrays, Problem, TensorSpec, Workload

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
    check_overrides(overrides)
    if meta.get("format") != FORMAT:
        raise ValueError(
            f"{directory / 'import.json'} has format {meta.get('format')!r}, not {FORMAT}: "
            "import the KernelBench file again"
        )
    filename = meta["file"]
    args = meta["arguments"]
    inputs = tuple(TensorSpec(a["name"], tuple(a["shape"])) for a in args if a["role"] != "output")
    outputs = tuple(TensorSpec(a["name"], tuple(a["shape"])) for a in args if a["role"] == "output")
    n_inputs = sum(a["role"] == "input" for a in args)
    groups = [tuple(a["keys"]) for a in args if a["role"] == "parameter"]
    workloads = {w: Workload(w, dict(d["sizes"])) for w, d in meta["workloads"].items()}
    constants = {w: dict(d["constants"]) for w, d in meta["workloads"].items()}
    by_shape = {tuple(s.dims(wl.sizes) for s in inputs): w for w, wl in workloads.items()}

    def recognize(shapes: list[tuple[int, ...]]) -> str:
        key = tuple(tuple(int(n) for n in s) for s in shapes)
        if key not in by_shape:
            known = "; ".join(f"{w}: {list(s)}" for s, w in by_shape.items())
            raise ValueError(
                f"problem {name!r}: input shapes {list(key)} are those of no workload ({known}); "
                "an imported problem runs on its own workloads only"
            )
        return by_shape[key]

    def reference(*arrays: np.ndarray) -> Arrays:
        from accelopt.problems.kernelbench.runtime import Reference

        w = recognize([a.shape for a in arrays])
        ns = _namespace(text, filename, constants[w])
        key = (id(ns), tuple(groups), n_inputs)
        with _lock:
            if key not in _references:
                _references[key] = Reference(ns, n_inputs, groups)
            return _references[key](*arrays)

    def generator(rng: np.random.Generator, shapes: list[tuple[int, ...]]) -> Arrays:
        from accelopt.problems.kernelbench.runtime import generate

        w = recognize(shapes)
        ns = _namespace(text, filename, constants[w])
        with _lock:
            arrays = generate(ns, n_inputs, rng)
        got = [tuple(a.shape) for a in arrays]
        if got != [tuple(s) for s in shapes]:
            raise ValueError(
                f"problem {name!r}: {filename} now makes inputs of shapes {got}, not {shapes}: "
                "import it again"
            )
        return arrays

    counted = {w: d["costs"] for w, d in meta["workloads"].items()}
    cost, notes = counted_cost_model(
        name, directory, workloads, counted, overrides, meta["cost_notes"]
    )
    return Problem(
        name=name,
        description=meta["description"],
        params=tuple(meta["params"]),
        inputs=inputs,
        outputs=outputs,
        reference=reference,
        cost=cost,
        workloads=workloads,
        directory=directory,
        tolerance=float(overrides.get("tolerance", meta["tolerance"])),
        generator=generator,
        cost_notes=notes,
        requires=("torch",),
        reference_text=reference_text(meta, text),
    )


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
