"""The OpenMP settings a user may give C kernels: libgomp's environment variables.

Those libgomp reads work as they would outside accelopt: the kernel's process reads them at its
start, and its trusted part makes the thread pool (binding it as ``OMP_PROC_BIND``,
``OMP_PLACES`` or ``GOMP_CPU_AFFINITY`` say) before any filter is installed (``kernel_host.c``).
``OMP_NUM_THREADS`` is the evaluation's thread count (``--threads``), whatever the shell says.
Any other ``OMP_``/``GOMP_`` name is refused in one sentence before an evaluation starts: a
tool interface would load a library into the kernel's process, and a misspelt name would
otherwise be ignored without a word.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# libgomp's variables (GCC 12-14 manuals); GCC 13 adds _ALL, _DEV and _DEV_<n> forms of some.
HONOURED = frozenset(
    {
        "OMP_ALLOCATOR",
        "OMP_AFFINITY_FORMAT",
        "OMP_CANCELLATION",
        "OMP_DEFAULT_DEVICE",
        "OMP_DISPLAY_AFFINITY",
        "OMP_DISPLAY_ENV",
        "OMP_DYNAMIC",
        "OMP_MAX_ACTIVE_LEVELS",
        "OMP_MAX_TASK_PRIORITY",
        "OMP_NESTED",
        "OMP_NUM_TEAMS",
        "OMP_NUM_THREADS",
        "OMP_PLACES",
        "OMP_PROC_BIND",
        "OMP_SCHEDULE",
        "OMP_STACKSIZE",
        "OMP_TARGET_OFFLOAD",
        "OMP_TEAMS_THREAD_LIMIT",
        "OMP_THREAD_LIMIT",
        "OMP_WAIT_POLICY",
        "GOMP_CPU_AFFINITY",
        "GOMP_DEBUG",
        "GOMP_SPINCOUNT",
        "GOMP_STACKSIZE",
        "GOMP_RTEMS_THREAD_POOLS",
    }
)
TOOLS = frozenset({"OMP_TOOL", "OMP_TOOL_LIBRARIES", "OMP_TOOL_VERBOSE_INIT", "OMP_DEBUG"})
_DEVICE_SUFFIX = re.compile(r"_(ALL|DEV|DEV_\d+)$")


def is_openmp(name: str) -> bool:
    return name.startswith(("OMP_", "GOMP_"))


def honoured(name: str) -> bool:
    return _DEVICE_SUFFIX.sub("", name) in HONOURED


def openmp_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The OpenMP settings of ``env`` that the kernel's process gets."""
    return {k: v for k, v in env.items() if is_openmp(k) and honoured(k)}


def refusal(env: Mapping[str, str]) -> str:
    """One sentence for the first OpenMP setting of ``env`` that cannot be honoured ('' when
    every one can)."""
    for name in sorted(k for k in env if is_openmp(k) and not honoured(k)):
        if name in TOOLS:
            return (
                f"{name} would load a tool library into the kernel's process, where only the "
                f"harness loads code: unset {name} to evaluate C kernels"
            )
        return (
            f"{name} is not an OpenMP setting libgomp reads (a misspelt name?): correct or unset "
            f"it; the ones honoured are OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY, "
            "OMP_WAIT_POLICY, GOMP_SPINCOUNT, OMP_STACKSIZE and the rest of libgomp's manual"
        )
    return ""
