"""A private cache directory for compiled kernels, set in os.environ for the whole session, and the
C compiler (the tests that compile are skipped without one)."""

from __future__ import annotations

import pytest

from accelopt.errors import CompilerNotFoundError
from accelopt.hardware.toolchain import Compiler, find_compiler


@pytest.fixture(scope="session")
def cc() -> Compiler:
    try:
        return find_compiler()
    except CompilerNotFoundError as exc:
        pytest.skip(str(exc))
