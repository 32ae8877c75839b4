"""Where Triton kernels run here: a CUDA GPU, or Triton's CPU interpreter (TRITON_INTERPRET=1).

Nothing here imports torch or triton: the parent process decides with these, workers import.
"""

from __future__ import annotations

import importlib.util
import os

from accelopt.errors import UserError

_TRUE = {"1", "true", "on", "yes"}
INSTALL_HINT = "pip install 'accelopt[triton]' (CPU torch, for the interpreter), or use a CUDA " \
    "environment that has torch and triton"  # fmt: skip


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (checked, never timed)."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in _TRUE


def require_packages() -> None:
    missing = [name for name in ("torch", "triton") if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"the triton backend needs {' and '.join(missing)}: {INSTALL_HINT}")
