"""What a C kernel may ``#include``: the common headers and the vector intrinsics headers of its
target architecture.

Headers. A kernel may include the common headers (``COMMON_HEADERS``) and the vector intrinsics
headers of its target architecture (``INTRINSICS_HEADERS``: ``<immintrin.h>`` on x86-64,
``<arm_neon.h>`` and ``<arm_sve.h>`` on aarch64); the target is the architecture of the compiler
accelopt builds kernels with (``CC``, ``-dumpmachine``), and that list is what the agents are told
(``allowed_headers``). The check itself accepts the intrinsics headers of every architecture
accelopt knows (``ACCEPTED_HEADERS``), so that one source can carry a fast path per architecture
behind ``#if defined(__x86_64__)`` / ``#elif defined(__aarch64__)``: the preprocessor never reads an
include in a branch that is not taken, and another architecture's header outside such a branch
does not compile (the target's compiler does not ship it, or it stops with an #error). Accepting
it opens nothing: these headers only declare intrinsics, and the symbols of the built object are
checked anyway (``symbols.py``). The target only changes what the rejection messages advise.
"""

from __future__ import annotations

from accelopt import settings
from accelopt.errors import CompilerNotFoundError
from accelopt.hardware.toolchain import compiler_for, host_arch, normal_arch

COMMON_HEADERS = frozenset(
    {
        "math.h",
        "string.h",
        "stdlib.h",
        "stdint.h",
        "omp.h",
        "stddef.h",
        "stdbool.h",
        "float.h",
        "limits.h",
        "stdalign.h",
    }
)
INTRINSICS_HEADERS: dict[str, tuple[str, ...]] = {
    "x86_64": ("immintrin.h",),
    "aarch64": ("arm_neon.h", "arm_sve.h"),
}
ACCEPTED_HEADERS = COMMON_HEADERS.union(*INTRINSICS_HEADERS.values())


def intrinsics_headers(arch: str) -> tuple[str, ...]:
    """The vector intrinsics headers of ``arch`` (``x86_64``, ``aarch64``, ...); () if unknown."""
    return INTRINSICS_HEADERS.get(normal_arch(arch), ())


def allowed_headers(arch: str) -> tuple[str, ...]:
    """What a kernel for ``arch`` may include, sorted: the common and the intrinsics headers."""
    return tuple(sorted(COMMON_HEADERS.union(intrinsics_headers(arch))))


def intrinsics_advice(arch: str) -> str:
    """What to use instead of inline assembly on ``arch``: "use the intrinsics of <...>"."""
    headers = "/".join(f"<{h}>" for h in intrinsics_headers(arch))
    if not headers:
        return f"write portable C (accelopt knows no intrinsics header for {arch})"
    return f"use the intrinsics of {headers}"


def target_arch() -> str:
    """The architecture kernels are compiled for: that of ``CC`` (this machine's without one)."""
    try:
        return compiler_for(settings.c_compiler()).arch
    except CompilerNotFoundError:
        return host_arch()
