"""A private cache directory for compiled kernels, set in os.environ for the whole session, and the
C compiler (the tests that compile are skipped without one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from accelopt.errors import CompilerNotFoundError
from accelopt.hardware.toolchain import Compiler, find_compiler


@pytest.fixture(scope="session")
def accelopt_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("accelopt-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACCELOPT_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def cc() -> Compiler:
    try:
        return find_compiler()
    except CompilerNotFoundError as exc:
        pytest.skip(str(exc))
