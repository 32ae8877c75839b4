"""Where Triton kernels run here: a CUDA GPU, or Triton's CPU interpreter (TRITON_INTERPRET=1).

Nothing here imports torch or triton: the parent process decides with these, workers import.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re

from accelopt import settings
from accelopt.errors import UserError

INSTALL_HINT = (
    "pip install 'accelopt[triton]' (CPU torch, for the interpreter), or use a CUDA "
    "environment that has torch and triton"
)


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (checked, never timed)."""
    return settings.triton_interpreter()


def require_packages() -> None:
    missing = [name for name in ("torch", "triton") if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"the triton backend needs {' and '.join(missing)}: {INSTALL_HINT}")
    found = triton_version()
    if found is not None and found < MIN_TRITON:
        raise UserError(
            f"the triton backend needs Triton {MIN_TRITON[0]}.{MIN_TRITON[1]} or later (its "
            f"settings are made through triton.knobs), and this environment has "
            f"{found[0]}.{found[1]}: {INSTALL_HINT}"
        )


MIN_TRITON = (3, 4)  # triton.knobs: the worker sets Triton's cache and fp32 default through them


def triton_version() -> tuple[int, int] | None:
    """The installed Triton's (major, minor), None where its metadata does not say."""
    try:
        text = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return None
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else None
