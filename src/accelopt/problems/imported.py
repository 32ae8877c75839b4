"""The problem an imported folder loads as: what the loaders of both formats (KernelBench's and
FlashInfer Trace's ``imported.py``) share.

Each format reads its own files (``model.py``; ``definition.json`` and the safetensors files)
into ``ImportedParts``: the tensors, the reference and the generator, what the agents are shown.
The rest comes from ``import.json``, alike in both: the size parameters, the workloads with the
costs counted at import, how each cost term was counted; ``problem.py`` may replace the cost terms
and the tolerance (the keyword arguments of ``load_imported``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from accelopt.problems.records import Arrays, CostModel, Problem, Sizes, TensorSpec, Workload

COST_TERMS = ("matmul_flops", "vector_flops", "bytes")
OVERRIDES = (*COST_TERMS, "tolerance")  # what load_imported(...) in a problem.py may replace


@dataclass(frozen=True)
class ImportedParts:
    """What a format's loader makes of its own files; ``imported_problem`` adds the rest."""

    description: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    reference: Callable[..., Arrays]
    generator: Callable[[np.random.Generator, list[tuple[int, ...]]], Arrays]
    reference_text: str
    tolerance: float  # unless problem.py passes tolerance=
    requires: tuple[str, ...] = ("torch",)


def check_import(
    path: Path, meta: Mapping[str, Any], overrides: Mapping[str, Any], expected: object, again: str
) -> None:
    """Refuse keyword arguments ``load_imported`` does not take (TypeError), and an
    ``import.json`` (at ``path``) of another format than ``expected`` (ValueError; ``again``
    says what to import again)."""
    check_overrides(overrides)
    if meta.get("format") != expected:
        raise ValueError(f"{path} has format {meta.get('format')!r}, not {expected!r}: {again}")


def check_overrides(overrides: Mapping[str, Any]) -> None:
    """The keyword arguments of ``load_imported``: cost terms (functions of the sizes) and the
    tolerance, nothing else."""
    unknown = sorted(set(overrides) - set(OVERRIDES))
    if unknown:
        raise TypeError(
            f"load_imported() got unknown keyword arguments {', '.join(unknown)}; it takes "
            f"{', '.join(OVERRIDES)}"
        )
    for term in COST_TERMS:
        if term in overrides and not callable(overrides[term]):
            raise TypeError(f"load_imported({term}=...) must be a function of the sizes")


def workload_records(meta: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The workloads of ``import.json`` by name (each with its ``sizes`` and counted ``costs``),
    then its ``aliases`` (another name for a workload: FlashInfer Trace's ``cpu``)."""
    records = dict(meta["workloads"])
    for alias, target in meta.get("aliases", {}).items():
        records[alias] = records[target]
    return records


def imported_problem(
    name: str,
    directory: Path,
    meta: Mapping[str, Any],
    parts: ImportedParts,
    overrides: Mapping[str, Any],
) -> Problem:
    """The problem of the imported folder ``directory``, named ``name``: ``parts`` and what its
    ``import.json`` (``meta``) holds, with the cost terms and tolerance ``problem.py`` passes."""
    records = workload_records(meta)
    workloads = {w: Workload(w, dict(d["sizes"])) for w, d in records.items()}
    counted = {w: d["costs"] for w, d in records.items()}
    cost, notes = counted_cost_model(
        name, directory, workloads, counted, overrides, meta["cost_notes"]
    )
    return Problem(
        name=name,
        description=parts.description,
        params=tuple(meta["params"]),
        inputs=parts.inputs,
        outputs=parts.outputs,
        reference=parts.reference,
        cost=cost,
        workloads=workloads,
        directory=directory,
        tolerance=float(overrides.get("tolerance", parts.tolerance)),
        generator=parts.generator,
        cost_notes=notes,
        requires=parts.requires,
        reference_text=parts.reference_text,
    )


def counted_cost_model(
    name: str,
    directory: Path,
    workloads: Mapping[str, Workload],
    counted: Mapping[str, Mapping[str, float]],
    overrides: Mapping[str, Any],
    counted_notes: Mapping[str, str],
) -> tuple[CostModel, dict[str, str]]:
    """The cost model of an imported problem: each term the value counted at import for the
    workload whose sizes these are (``counted``: workload -> term -> value), unless problem.py
    passes its own function; and how each term was obtained."""

    def counted_term(term: str) -> Callable[[Sizes], float]:
        def cost(sizes: Sizes) -> float:
            for w, workload in workloads.items():
                if all(sizes.get(k) == v for k, v in workload.sizes.items()):
                    return float(counted[w][term])
            raise ValueError(
                f"problem {name!r} has counted costs for its workloads only, and the sizes "
                f"{dict(sizes)} are none of them: pass {term}=lambda s: ... to load_imported in "
                f"{directory / 'problem.py'}"
            )

        return cost

    terms = {t: overrides.get(t) or counted_term(t) for t in COST_TERMS}
    notes = dict(counted_notes)
    notes.update({t: "set in problem.py" for t in COST_TERMS if t in overrides})
    return CostModel(**terms), notes
