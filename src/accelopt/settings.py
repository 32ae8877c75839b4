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


def cpu_target() -> str | None:
    """The CPU C kernels and micro-benchmarks are built for: ``ACCELOPT_CPU_TARGET`` (a GCC
    ``-march``/``-mcpu`` value such as ``x86-64-v3``), or None for this machine's own
    (``native``)."""
    value = (os.environ.get("ACCELOPT_CPU_TARGET") or "").strip()
    return value or None


def env(name: str) -> str | None:
    """An environment variable by name (e.g. the API key variable a config names), or None."""
    value = os.environ.get(name)
    return value if value else None


def llm_overrides() -> dict[str, str]:
    """Overrides of the default LLM endpoint: ACCELOPT_LLM_BASE_URL, ACCELOPT_LLM_MODEL and
    ACCELOPT_LLM_API_KEY (the key itself, for quick use; a config names a variable instead)."""
    names = {"base_url": "ACCELOPT_LLM_BASE_URL", "model": "ACCELOPT_LLM_MODEL"}
    names["api_key"] = "ACCELOPT_LLM_API_KEY"
    return {field: value for field, var in names.items() if (value := env(var))}


def workspace_dir(explicit: Path | None = None) -> Path:
    """The workspace (the run store and the optimization memory): ``--workspace``, else
    ``ACCELOPT_WORKSPACE``, else ``./.accelopt``."""
    if explicit is not None:
        return explicit
    return Path(os.environ.get("ACCELOPT_WORKSPACE") or ".accelopt")
