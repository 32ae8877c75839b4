"""A private cache directory for compiled kernels, set in os.environ for the whole session, the
C compiler (the tests that compile are skipped without one), and the headers a C kernel may
include, written out here."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from accelopt.errors import CompilerNotFoundError
from accelopt.hardware.toolchain import Compiler, find_compiler


@pytest.fixture(scope="session")
def cc() -> Compiler:
    try:
        return find_compiler()
    except CompilerNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def headers_for() -> Callable[[str], set[str]]:
    """``headers_for(arch)``: what a C kernel for ``arch`` may include, written out here rather
    than taken from headers.py, so that a test comparing a header list with it can fail."""
    common = {
        "float.h", "limits.h", "math.h", "omp.h", "stdalign.h", "stdbool.h", "stddef.h",
        "stdint.h", "stdlib.h", "string.h",
    }  # fmt: skip
    intrinsics = {"x86_64": {"immintrin.h"}, "aarch64": {"arm_neon.h", "arm_sve.h"}}
    return lambda arch: common | intrinsics.get(arch, set())
