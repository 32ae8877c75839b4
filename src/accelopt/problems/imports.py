"""What the importers of other formats (KernelBench, FlashInfer Trace) share: the refusal, the
result, the name check, the overrides a generated ``problem.py`` may pass, and the atomic write of
a problem folder (nothing half-imported stays behind)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelopt.errors import UserError
from accelopt.problems.loader import NAME_PATTERN
from accelopt.problems.records import CostModel, Problem, Sizes, Workload

COST_TERMS = ("matmul_flops", "vector_flops", "bytes")
OVERRIDES = (*COST_TERMS, "tolerance")  # what load_imported(...) in a problem.py may replace


class ImportRefused(UserError):
    """A file or definition accelopt cannot import; ``reason`` is one sentence naming why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Imported:
    """A problem written to ``directory`` (named ``name``), and what the import had to say."""

    name: str
    directory: Path
    problem: Problem
    notes: tuple[str, ...]


def exists_refusal(name: str, hint: str) -> ImportRefused:
    return ImportRefused(
        f"a workspace problem named {name} exists: remove it with "
        f"`accelopt problem remove {name}` or {hint}"
    )


def check_name(name: str, dest_root: Path, reserved: Collection[str], hint: str) -> None:
    """Refuse a name that is not a problem name, a suite problem's, or a workspace problem's;
    ``hint`` ends each sentence with what else to do (e.g. "choose another --name")."""
    if not NAME_PATTERN.fullmatch(name):
        raise ImportRefused(
            f"{name!r} is not a valid problem name (lowercase letters, digits and underscores, "
            f"starting with a letter): {hint}"
        )
    if name in reserved:
        raise ImportRefused(f"a suite problem is named {name}: {hint}")
    if (dest_root / name).exists():
        raise exists_refusal(name, hint)


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


def write_problem(
    dest_root: Path,
    name: str,
    files: Mapping[str, bytes | Path],
    payload: Mapping[str, Any],
    loads: Callable[[Path], object],
    hint: str,
) -> Path:
    """Write ``dest_root/<name>/`` atomically: ``files`` (bytes, or a file to copy, by relative
    path) and ``import.json`` into a hidden folder, ``loads(folder)`` to prove the problem loads
    there, then one rename; on any failure nothing is left behind."""
    dest_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.importing.", dir=dest_root))
    try:
        for relative, content in files.items():
            target = tmp / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                shutil.copyfile(content, target)
            else:
                target.write_bytes(content)
        (tmp / "import.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        loads(tmp)
        os.chmod(tmp, 0o755)
        final = dest_root / name
        if final.exists():
            raise exists_refusal(name, hint)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


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
