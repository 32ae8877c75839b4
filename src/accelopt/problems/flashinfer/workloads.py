"""The workload lines of a FlashInfer Trace dataset: read them, and choose those accelopt can run.

A workload binds the definition's ``var`` axes and says where each input comes from: ``random``
(N(0, 1), as flashinfer-bench draws float32 inputs), ``safetensors`` (a file under the dataset,
read with the ``safetensors`` package when it is installed), or ``scalar`` (which the kernel
contract cannot pass yet: the definition is refused).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from accelopt.problems.flashinfer.schema import Definition, Trace
from accelopt.problems.kernelbench.source import ImportRefused, short_error


@dataclass(frozen=True)
class Line:
    """One line of a workloads file, as it came, and what it parses to."""

    text: str
    where: str  # file:line
    trace: Trace | None
    error: str = ""


@dataclass(frozen=True)
class Kept:
    uuid: str
    sizes: dict[str, int]
    safetensors: dict[str, dict[str, str]]  # input -> file (in the problem folder), tensor_key


@dataclass
class Chosen:
    kept: list[Kept] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    blobs: dict[str, Path] = field(default_factory=dict)  # file in the problem folder -> source


def first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


def read_workload_lines(dataset: Path) -> dict[str, list[Line]]:
    """Every line of ``workloads/**.jsonl`` by the definition it names (lines naming none are
    skipped)."""
    by_definition: dict[str, list[Line]] = {}
    root = dataset / "workloads"
    for path in sorted(root.rglob("*.jsonl")) if root.is_dir() else []:
        rel = path.relative_to(dataset).as_posix()
        try:
            body = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for number, text in enumerate(body.splitlines(), 1):
            if not text.strip():
                continue
            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                continue
            name = data.get("definition") if isinstance(data, dict) else None
            if not isinstance(name, str):
                continue
            try:
                line = Line(text, f"{rel}:{number}", Trace.model_validate(data))
            except ValidationError as exc:
                line = Line(text, f"{rel}:{number}", None, first_error(exc))
            by_definition.setdefault(name, []).append(line)
    return by_definition


def choose(definition: Definition, lines: list[Line], dataset: Path) -> Chosen:
    """The workloads of the lines that accelopt can run, in file order, and a note for each line
    left out; ImportRefused when a workload passes a scalar."""
    chosen = Chosen()
    no_package = 0
    have_package = importlib.util.find_spec("safetensors") is not None
    shapes_of: dict[tuple, tuple[str, bool]] = {}  # input shapes -> (uuid, reads files)
    for line in lines:
        why = _why_not(definition, line, chosen)
        if why:
            chosen.notes.append(f"{line.where}: {why}: left out")
            continue
        assert line.trace is not None
        w = line.trace.workload
        sizes = {
            a: spec.value if spec.type == "const" else int(w.axes[a])
            for a, spec in definition.axes.items()
        }
        reads = {n: s for n, s in w.inputs.items() if s.type == "safetensors"}
        if reads and not have_package:
            no_package += 1
            continue
        try:
            stored = _safetensors(definition, reads, sizes, dataset, chosen.blobs)
        except ValueError as exc:
            chosen.notes.append(f"workload {w.uuid}: {exc}: left out")
            continue
        shapes = tuple(tuple(sizes[a] for a in s.shape or ()) for s in definition.inputs.values())
        if shapes in shapes_of and (stored or shapes_of[shapes][1]):
            chosen.notes.append(
                f"workload {w.uuid} has the input shapes of workload {shapes_of[shapes][0]} and "
                "one of them reads its inputs from files (accelopt tells workloads apart by "
                "their shapes): left out"
            )
            continue
        shapes_of.setdefault(shapes, (w.uuid, bool(stored)))
        chosen.kept.append(Kept(w.uuid, sizes, stored))
    if no_package:
        chosen.notes.append(
            f"{no_package} workload(s) read safetensors files and the safetensors package is not "
            "installed (pip install safetensors): left out"
        )
    return chosen


def _why_not(definition: Definition, line: Line, chosen: Chosen) -> str:
    if line.trace is None:
        return f"not a workload ({line.error})"
    if line.trace.solution is not None or line.trace.evaluation is not None:
        return "a trace with a solution, not a workload"
    w = line.trace.workload
    if any(k.uuid == w.uuid for k in chosen.kept):
        return f"workload {w.uuid} again"
    missing = [a for a in definition.var_axes if a not in w.axes]
    unknown = [a for a in w.axes if a not in definition.axes]
    changed = [
        a
        for a, spec in definition.axes.items()
        if spec.type == "const" and a in w.axes and w.axes[a] != spec.value
    ]
    if missing or unknown or changed:
        parts = [
            f"{what} {', '.join(names)}"
            for what, names in (
                ("no value for axes", missing),
                ("unknown axes", unknown),
                ("other values for const axes", changed),
            )
            if names
        ]
        return f"workload {w.uuid} gives {'; '.join(parts)}"
    zero = [a for a in definition.var_axes if w.axes[a] == 0]
    if zero:
        return f"workload {w.uuid} sets {', '.join(zero)} to 0"
    unknown = [n for n in w.inputs if n not in definition.inputs]
    if unknown:
        return f"workload {w.uuid} describes inputs the definition does not have: {unknown}"
    for n, spec in w.inputs.items():
        if spec.type == "scalar":
            raise ImportRefused(
                f"workload {w.uuid} of definition {definition.name} gives input {n} as a scalar "
                "value: scalar inputs the contract cannot pass yet (its arguments are float32 "
                "tensors)"
            )
    return ""


def _safetensors(
    definition: Definition,
    reads: dict[str, Any],
    sizes: dict[str, int],
    dataset: Path,
    blobs: dict[str, Path],
) -> dict[str, dict[str, str]]:
    """Check each file-read input (it exists, holds the key, float32 of the right shape), and
    where it goes in the problem folder."""
    stored: dict[str, dict[str, str]] = {}
    if not reads:
        return stored
    from safetensors import safe_open

    for n, spec in reads.items():
        path = PurePosixPath(spec.path)
        source = Path(spec.path) if path.is_absolute() else dataset / path
        if not path.is_absolute() and ".." not in path.parts:
            file = f"data/{path.as_posix()}"  # where it lies in the dataset
        else:
            digest = hashlib.sha256(spec.path.encode()).hexdigest()[:8]
            file = f"data/outside/{digest}_{path.name}"
        if not source.is_file():
            raise ValueError(f"input {n} reads {spec.path}, which is not there")
        try:
            with safe_open(str(source), framework="numpy") as f:
                if spec.tensor_key not in f.keys():  # noqa: SIM118 (a safetensors handle)
                    raise ValueError(f"input {n}: {spec.path} holds no tensor {spec.tensor_key}")
                array = f.get_tensor(spec.tensor_key)
        except ValueError:
            raise
        except Exception as exc:
            why = f"input {n}: {spec.path} cannot be read ({short_error(exc)})"
            raise ValueError(why) from None
        want = tuple(sizes[a] for a in definition.inputs[n].shape or ())
        if str(array.dtype) != "float32" or tuple(array.shape) != want:
            raise ValueError(
                f"input {n}: {spec.path}[{spec.tensor_key}] is {array.dtype} {list(array.shape)}, "
                f"not float32 {list(want)}"
            )
        blobs[file] = source
        stored[n] = {"file": file, "tensor_key": spec.tensor_key, "path": spec.path}
    return stored
