"""The one place where accelopt reads environment variables."""

from __future__ import annotations

import math
import os
from pathlib import Path

from accelopt.errors import UserError


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
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "it is a file" if path.is_file() else exc.strerror or str(exc)
        origin = "ACCELOPT_CACHE_DIR" if explicit else "the cache directory"
        raise UserError(
            f"{origin} {str(path)!r} cannot be used ({why}): set ACCELOPT_CACHE_DIR to a "
            "directory you can write"
        ) from None
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


def sandbox_required() -> bool:
    """Whether a C kernel may run only under the system call filter (the default): set
    ``ACCELOPT_UNSANDBOXED=1`` to run kernels where the system cannot install it (unsafe)."""
    return os.environ.get("ACCELOPT_UNSANDBOXED", "").strip().lower() not in {"1", "yes", "true"}


def serve_triton() -> bool:
    """Whether ``accelopt serve`` and ``accelopt mcp`` evaluate Triton kernels sent to them:
    ``ACCELOPT_SERVE_TRITON`` set to 1, true, on or yes (the operator's explicit opt-in). Off by
    default: a Triton kernel is Python, and until its containment has been proven on a GPU host,
    serving it would let whoever sends one run code as the server's user."""
    return os.environ.get("ACCELOPT_SERVE_TRITON", "").strip().lower() in {"1", "true", "on", "yes"}


def triton_interpreter() -> bool:
    """Whether Triton runs kernels in its CPU interpreter, where they are checked and never
    timed: ``TRITON_INTERPRET`` set to 1, true, on or yes. Off by default (kernels run on a CUDA
    GPU)."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in {"1", "true", "on", "yes"}


def cuda_visible_devices() -> str | None:
    """``CUDA_VISIBLE_DEVICES`` as given: the GPUs CUDA may use, the first being the one kernels
    run on. None when unset (every GPU); set but empty means none, so ``""`` is kept."""
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def openblas_coretype() -> str | None:
    """``OPENBLAS_CORETYPE``: the core type OpenBLAS is told to use (capping it at that core's
    kernels), or None when unset or empty (OpenBLAS picks the CPU's own)."""
    return env("OPENBLAS_CORETYPE")


def columns_set() -> bool:
    """Whether ``COLUMNS`` (the terminal width; rich reads it itself) is set and not empty: not
    set by default, when piped output gets a width of accelopt's."""
    return bool(os.environ.get("COLUMNS"))


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


def llm_timeout_s() -> float | None:
    """``ACCELOPT_LLM_TIMEOUT_S``: the seconds one try of an LLM call may take (the default
    endpoint's ``timeout_s``; a call gives up after that times its tries), or None when unset."""
    raw = env("ACCELOPT_LLM_TIMEOUT_S")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise UserError(
            f"ACCELOPT_LLM_TIMEOUT_S={raw!r} is not a number of seconds above 0: set it to one "
            "(e.g. 120), or unset it"
        )
    return seconds


def workspace_dir(explicit: Path | None = None) -> Path:
    """The workspace (the run store and the optimization memory): ``--workspace``, else
    ``ACCELOPT_WORKSPACE``, else ``./.accelopt``."""
    if explicit is not None:
        return explicit
    return Path(os.environ.get("ACCELOPT_WORKSPACE") or ".accelopt")


def workspace_origin(explicit: Path | None = None) -> str:
    """Where the workspace came from, for messages: --workspace, ACCELOPT_WORKSPACE or the
    default."""
    if explicit is not None:
        return "--workspace"
    return "ACCELOPT_WORKSPACE" if os.environ.get("ACCELOPT_WORKSPACE") else "the workspace"


def environment() -> dict[str, str]:
    """A copy of the whole environment (``redaction.secrets_to_redact`` looks through it)."""
    return dict(os.environ)
