"""Export a problem as a FlashInfer Trace dataset: its definition and workloads, and when given a
kernel (a solution) and its evaluations (one trace each).

A problem imported from FlashInfer is written back as it came. Any other problem gets a
synthesized definition: an axis per size parameter (``const`` where every workload agrees),
float32 tensors, and a ``run()`` that calls the NumPy reference on the tensors.
"""

from __future__ import annotations

import inspect
import json
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import accelopt.interop.flashinfer.traces as traces
from accelopt.interop.flashinfer.traces import AUTHOR, ExportRefused
from accelopt.problems.flashinfer.imported import (
    DEFINITION_FILE,
    FORMAT,
    IMPORT_FILE,
    WORKLOADS_FILE,
)
from accelopt.problems.flashinfer.schema import Definition
from accelopt.problems.records import Problem

if TYPE_CHECKING:  # annotations only: no need to import profiling (slow) to write records
    from accelopt.backends.kernel import Kernel
    from accelopt.hardware.spec import HardwareSpec
    from accelopt.profiling.evaluation import Evaluation

ADAPTER = '''

# --- added by accelopt's FlashInfer Trace export: run() calls the NumPy reference above ---
_accelopt_reference = {function}


def run(*tensors):
    """The NumPy reference on torch tensors: inputs in, outputs out, in the inputs' dtype."""
    import numpy
    import torch

    arrays = [t.detach().cpu().numpy() for t in tensors]
    outs = _accelopt_reference(*arrays)
    outs = tuple(outs) if isinstance(outs, tuple | list) else (outs,)
    dtype = tensors[0].dtype if tensors else torch.float32
    device = tensors[0].device if tensors else "cpu"
    outs = tuple(
        torch.from_numpy(numpy.ascontiguousarray(o)).to(device=device, dtype=dtype) for o in outs
    )
    return outs[0] if len(outs) == 1 else outs
'''


def imported_from_flashinfer(problem: Problem) -> dict[str, Any] | None:
    """import.json of a problem imported from FlashInfer Trace, else None."""
    path = Path(problem.directory) / IMPORT_FILE
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(meta, dict) and meta.get("format") == FORMAT
    return meta if ok and (Path(problem.directory) / DEFINITION_FILE).is_file() else None


def export_problem(
    problem: Problem,
    out_dir: Path,
    *,
    solution: Kernel | None = None,
    evaluations: Sequence[Evaluation] = (),
    hardware: HardwareSpec | None = None,
) -> list[Path]:
    """Write the problem into the dataset folder ``out_dir`` (with ``solution`` and one trace per
    evaluation of it); the files written. ExportRefused (nothing written) when it cannot."""
    out_dir = Path(out_dir)
    meta = imported_from_flashinfer(problem)
    if meta is not None:
        definition_text = (problem.directory / DEFINITION_FILE).read_text(encoding="utf-8")
        lines_text = (problem.directory / WORKLOADS_FILE).read_text(encoding="utf-8")
        workloads = _imported_workloads(meta, lines_text)
    else:
        data, lines = synthesize(problem)
        definition_text = json.dumps(data, indent=2) + "\n"
        lines_text = "".join(json.dumps(line) + "\n" for line in lines.values())
        workloads = {k: line["workload"] for k, line in lines.items()}
    definition = Definition.model_validate_json(definition_text)
    for e in evaluations:
        traces.check(problem, solution, e, hardware)
    sol = traces.solution(definition, problem, solution, hardware) if solution else None
    records = [
        traces.trace(definition, workloads, e, hardware, sol["name"])
        for e in evaluations
        if sol is not None
    ]
    op, name = definition.op_type, definition.name
    files = {
        f"definitions/{op}/{name}.json": definition_text,
        f"workloads/{op}/{name}.jsonl": lines_text,
    }
    if sol is not None:
        files[f"solutions/{AUTHOR}/{op}/{name}/{sol['name']}.json"] = json.dumps(sol, indent=2)
    if records:
        files[f"traces/{AUTHOR}/{op}/{name}.jsonl"] = "".join(json.dumps(r) + "\n" for r in records)
    written: list[Path] = []
    for relative, text in files.items():
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        written.append(path)
    for blob in _blobs(meta):
        target = out_dir / blob["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(problem.directory / blob["file"], target)
        written.append(target)
    return written


def _imported_workloads(meta: dict[str, Any], lines_text: str) -> dict[str, dict[str, Any]]:
    """The workload objects of the lines as they came, by accelopt workload name (the uuid,
    and the ``cpu`` alias for the one it names)."""
    objects: dict[str, dict[str, Any]] = {}
    for text in lines_text.splitlines():
        try:
            w = json.loads(text)["workload"]
            objects.setdefault(w["uuid"], w)
        except (ValueError, KeyError, TypeError):
            continue
    for alias, target in meta.get("aliases", {}).items():
        if target in objects:
            objects[alias] = objects[target]
    return objects


def _blobs(meta: dict[str, Any] | None) -> list[dict[str, str]]:
    if meta is None:
        return []
    found = {}
    for record in meta["workloads"].values():
        for blob in record.get("safetensors", {}).values():
            if not Path(blob["path"]).is_absolute() and ".." not in Path(blob["path"]).parts:
                found[blob["path"]] = blob
    return list(found.values())


def workload_uuid(problem: Problem, workload: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"accelopt:{problem.name}:{workload}"))


def synthesize(problem: Problem) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The definition of a problem that did not come from FlashInfer, and its workload lines
    (workload-only traces) by accelopt workload name."""
    sizes = [dict(w.sizes) for w in problem.workloads.values()]
    axes: dict[str, dict[str, Any]] = {}
    for p in problem.params:
        values = {s.get(p) for s in sizes}
        if len(values) == 1 and None not in values:
            axes[p] = {"type": "const", "value": int(values.pop())}
        else:
            axes[p] = {"type": "var"}
    literals: dict[str, str] = {}
    for t in (*problem.inputs, *problem.outputs):
        for entry in t.shape:
            if entry.isdigit() and entry not in literals:
                axis = f"lit{entry}"
                while axis in axes:
                    axis += "_"
                literals[entry] = axis
                axes[axis] = {"type": "const", "value": int(entry)}

    def spec(t) -> dict[str, Any]:
        return {"shape": [literals.get(e, e) for e in t.shape], "dtype": "float32"}

    data = {
        "name": problem.name,
        "op_type": problem.name,
        "description": problem.description,
        "tags": [f"source:accelopt-{problem.origin}"],
        "axes": axes,
        "inputs": {t.name: spec(t) for t in problem.inputs},
        "outputs": {t.name: spec(t) for t in problem.outputs},
        "reference": numpy_reference(problem),
    }
    var = [p for p, a in axes.items() if a["type"] == "var"]
    workloads = {
        w.name: {
            "definition": problem.name,
            "solution": None,
            "workload": {
                "uuid": workload_uuid(problem, w.name),
                "axes": {p: int(w.sizes[p]) for p in var},
                "inputs": {t.name: {"type": "random"} for t in problem.inputs},
            },
            "evaluation": None,
        }
        for w in problem.workloads.values()
    }
    return data, workloads


def numpy_reference(problem: Problem) -> str:
    """The problem module's source followed by a run() that calls its reference on tensors."""
    function = problem.reference
    module = inspect.getmodule(function)
    name = getattr(function, "__name__", "")
    if module is None or not name.isidentifier() or getattr(module, name, None) is not function:
        raise ExportRefused(
            f"problem {problem.name}'s reference is not a function of its problem module (an "
            "imported KernelBench problem, say), so accelopt cannot write it as a FlashInfer "
            "run() yet"
        )
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError) as exc:
        why = f"the source of problem {problem.name} cannot be read ({exc})"
        raise ExportRefused(why) from None
    return source.rstrip() + "\n" + ADAPTER.format(function=name)
