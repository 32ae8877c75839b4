"""``accelopt.load(DIR)``: import an export folder's Python module."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import ModuleType

from accelopt.export.runtime import MANIFEST, import_file


def load(folder: str | Path) -> ModuleType:
    """The Python module of the export folder ``folder`` (written by ``accelopt export``): its
    function has the problem's name and argument names."""
    folder = Path(folder).resolve()
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{folder} is not an accelopt export (no {MANIFEST})")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    tag = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    name = f"_accelopt_export_{manifest['problem']}_{tag}"
    return import_file(folder / f"{manifest['problem']}_kernel.py", name)
