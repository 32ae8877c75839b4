"""What the importers of other formats (KernelBench, FlashInfer Trace) share: the refusal, the
result, the name check and the atomic write of a problem folder (nothing half-imported stays
behind). What their loaders share is in ``imported.py``."""

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
from accelopt.problems.records import Problem


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
