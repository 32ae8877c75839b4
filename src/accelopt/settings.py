"""The one place where accelopt reads environment variables."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where compiled kernels, measured hardware ceilings and device locks live.

    ``ACCELOPT_CACHE_DIR`` overrides; else ``$XDG_CACHE_HOME/accelopt`` or ``~/.cache/accelopt``.
    """
    explicit = os.environ.get("ACCELOPT_CACHE_DIR")
    if explicit:
        path = Path(explicit)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(base) / "accelopt"
    path.mkdir(parents=True, exist_ok=True)
    return path


def c_compiler() -> str:
    """The C compiler: ``CC`` when set, else ``cc``."""
    return os.environ.get("CC") or "cc"
