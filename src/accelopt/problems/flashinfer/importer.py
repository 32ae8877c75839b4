"""Import the float32 definitions of a FlashInfer Trace dataset as workspace problems: check, name,
choose the workloads, count the costs, then write ``<dest_root>/<name>/`` atomically."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import accelopt.problems.flashinfer.checks as checks
import accelopt.problems.flashinfer.workloads as wls
from accelopt.problems.flashinfer.imported import (
    DEFAULT_TOLERANCE,
    DEFINITION_FILE,
    FORMAT,
    WORKLOADS_FILE,
    build_problem,
    reference_run,
    tensor_specs,
    torch_module,
)
from accelopt.problems.flashinfer.schema import Definition
from accelopt.problems.imports import Imported, ImportRefused, check_name, write_problem
from accelopt.problems.kernelbench.source import gpu_refusal, mentions_gpu, short_error
from accelopt.problems.records import TensorSpec

NAME_HINT = "rename the definition"


PROBLEM_PY = (
    '"""{name}: FlashInfer Trace definition {definition}, imported by '
    "`accelopt problem import flashinfer`."
    '''

Edit the keyword arguments to override the counted cost model or the tolerance, e.g.
    load_imported(Path(__file__).parent, bytes=lambda s: {example}, tolerance=1e-3)
The definition and its workload lines are kept as they came (definition.json, workloads.jsonl);
the sizes and counted costs of each workload are in import.json.
"""

from pathlib import Path

from accelopt.problems.flashinfer import load_imported

PROBLEM = load_imported(Path(__file__).parent)
'''
)


def problem_name(definition_name: str) -> str:
    """The definition's name as a problem name: ``GEMM-n4096`` -> ``gemm_n4096``."""
    stem = re.sub(r"[^a-z0-9]+", "_", definition_name.lower()).strip("_")
    if not stem[:1].isalpha():
        stem = f"fi_{stem}".rstrip("_")
    return stem[:128]


def import_dataset(
    dataset: Path,
    dest_root: Path,
    *,
    definitions: Collection[str] = (),
    reserved_names: Collection[str] = (),
) -> list[tuple[str, Imported | ImportRefused]]:
    """Import each definition of the dataset (those named in ``definitions`` when given), each
    under its own name; one entry per definition. A refused definition does not stop the others."""
    dataset, dest_root = Path(dataset), Path(dest_root)
    if not (dataset / "definitions").is_dir():
        raise ImportRefused(
            f"{dataset} has no definitions folder: a FlashInfer Trace dataset holds "
            "definitions/**.json and workloads/**.jsonl"
        )
    try:
        torch_module()
    except ModuleNotFoundError as exc:
        why = f"importing a FlashInfer Trace dataset runs its references, and {exc}"
        raise ImportRefused(why) from None
    found = _read_definitions(dataset)
    lines = wls.read_workload_lines(dataset)
    wanted = list(dict.fromkeys(definitions)) or list(found)
    results: list[tuple[str, Imported | ImportRefused]] = []
    for key in wanted:
        if key not in found:
            known = ", ".join(found) or "none"
            reason = f"{dataset} has no definition named {key} (it has: {known})"
            results.append((key, ImportRefused(reason)))
            continue
        entry = found[key]
        try:
            if isinstance(entry, ImportRefused):
                raise entry
            text, definition = entry
            done = import_definition(
                definition,
                text,
                lines.get(definition.name, []),
                dataset,
                dest_root,
                reserved_names=reserved_names,
            )
            results.append((key, done))
        except ImportRefused as exc:
            results.append((key, exc))
        except Exception as exc:  # a definition that breaks the importer must not stop the others
            results.append((key, ImportRefused(f"{key} could not be imported: {short_error(exc)}")))
    return results


def _read_definitions(dataset: Path) -> dict[str, tuple[str, Definition] | ImportRefused]:
    found: dict[str, tuple[str, Definition] | ImportRefused] = {}
    for path in sorted((dataset / "definitions").rglob("*.json")):
        where = path.relative_to(dataset).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
            definition = Definition.model_validate_json(text)
        except (OSError, UnicodeDecodeError) as exc:
            found[where] = ImportRefused(f"cannot read {where} ({short_error(exc)})")
            continue
        except ValidationError as exc:
            why = wls.first_error(exc)
            found[where] = ImportRefused(f"{where} is not a FlashInfer Trace definition ({why})")
            continue
        if definition.name in found:
            found[f"{definition.name} ({where})"] = ImportRefused(
                f"{where} defines {definition.name} again; the first definition was kept"
            )
            continue
        found[definition.name] = (text, definition)
    return found


def import_definition(
    definition: Definition,
    text: str,
    lines: list[wls.Line],
    dataset: Path,
    dest_root: Path,
    *,
    reserved_names: Collection[str] = (),
) -> Imported:
    """Import one definition with its workload lines; ImportRefused (nothing written) when
    accelopt cannot take it."""
    name = problem_name(definition.name)
    check_name(name, dest_root, reserved_names, NAME_HINT)
    checks.check_definition(definition)
    chosen = wls.choose(definition, lines, dataset)
    notes = list(chosen.notes)
    if not chosen.kept:
        why = f" ({'; '.join(notes)})" if notes else ""
        raise ImportRefused(f"definition {definition.name} has no workload accelopt can use{why}")
    records, cost_notes = _counted_workloads(definition, chosen.kept, notes)
    if not records:
        raise ImportRefused(
            f"definition {definition.name} has no workload accelopt can use ({'; '.join(notes)})"
        )
    inputs, outputs = tensor_specs(definition)
    args = [*inputs, *outputs]
    payload = {
        "format": FORMAT,
        "name": name,
        "definition": definition.name,
        "op_type": definition.op_type,
        "dataset": str(dataset.resolve()),
        "params": list(definition.axes),
        "arguments": [t.name for t in args],
        "workloads": records,
        "aliases": _aliases(records, args, notes),
        "tolerance": DEFAULT_TOLERANCE,
        "cost_notes": cost_notes,
        "notes": notes,
        "torch": torch_module().__version__,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    files = _files(name, definition, text, lines, chosen.blobs)

    def loads(folder: Path) -> None:
        parsed = Definition.model_validate_json(text)
        checks.check_reference(build_problem(folder, payload, parsed, name, {}))

    directory = write_problem(dest_root, name, files, payload, loads, NAME_HINT)
    problem = build_problem(directory, payload, definition, name, {})
    return Imported(name, directory, problem, tuple(notes))


def _counted_workloads(
    definition: Definition, kept: Sequence[wls.Kept], notes: list[str]
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """import.json's workloads (by uuid: sizes, counted costs, safetensors inputs) and how the
    costs were counted; a workload whose costs cannot be counted is left out, with a note. The
    costs are counted once for each set of sizes."""
    inputs, outputs = tensor_specs(definition)
    run = _run(definition)
    records: dict[str, dict[str, Any]] = {}
    counted: dict[tuple, dict[str, float]] = {}
    all_notes: dict[str, str] = {}
    for workload in kept:
        key = tuple(sorted(workload.sizes.items()))
        if key not in counted:
            try:
                costs, term_notes = checks.count(definition, run, workload.sizes, inputs, outputs)
            except checks.Uncountable as exc:
                notes.append(
                    f"workload {workload.uuid}: its costs cannot be counted ({exc}): left out"
                )
                continue
            counted[key] = costs
            all_notes = all_notes or term_notes
        records[workload.uuid] = {"sizes": workload.sizes, "costs": counted[key]}
        if workload.safetensors:
            records[workload.uuid]["safetensors"] = workload.safetensors
    return records, all_notes


def _aliases(
    records: Mapping[str, Mapping[str, Any]], args: Sequence[TensorSpec], notes: list[str]
) -> dict[str, str]:
    """``cpu``: the first of the smallest workloads, unless a workload's uuid is ``cpu``."""
    if "cpu" in records:
        notes.append("a workload's uuid is 'cpu', so there is no cpu alias")
        return {}
    smallest = min(records, key=lambda w: sum(t.nbytes(records[w]["sizes"]) for t in args))
    return {"cpu": smallest}


def _files(
    name: str, definition: Definition, text: str, lines: list[wls.Line], blobs: Mapping[str, Path]
) -> dict[str, bytes | Path]:
    """The files of the problem folder (relative path -> bytes, or a file to copy): the
    definition and its workload lines as they came, the safetensors files, ``problem.py``."""
    body = "".join(f"{line.text}\n" for line in lines)
    params = list(definition.axes)
    example = f'4 * s["{params[0]}"]' if params else "0"
    problem_py = PROBLEM_PY.format(name=name, definition=definition.name, example=example)
    files: dict[str, bytes | Path] = {DEFINITION_FILE: text.encode(), WORKLOADS_FILE: body.encode()}
    files |= {stored: Path(source) for stored, source in blobs.items()}
    files["problem.py"] = problem_py.encode()
    return files


def _run(definition: Definition):
    filename = f"{definition.name}.reference.py"
    try:
        return reference_run(definition.reference, filename)
    except Exception as exc:
        if mentions_gpu(exc):
            raise gpu_refusal(filename, exc) from None
        raise ImportRefused(
            f"the reference of {definition.name} fails to run: {short_error(exc)}"
        ) from None
