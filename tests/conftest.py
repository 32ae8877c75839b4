"""Fixtures shared across the test packages: a private cache and fixed ceilings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from accelopt.hardware.spec import HardwareSpec


@pytest.fixture(scope="session")
def accelopt_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """ACCELOPT_CACHE_DIR in os.environ, so that worker processes started later inherit it."""
    path = tmp_path_factory.mktemp("accelopt-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACCELOPT_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def hw() -> HardwareSpec:
    """Fixed ceilings near this machine's, so that no test depends on a measurement."""
    return HardwareSpec(
        name="test-cpu",
        backend="cpu",
        matmul_rate=545e9,
        vector_rate=140e9,
        bandwidth=45e9,
        cores=2,
        llc_bytes=32 << 20,
    )
