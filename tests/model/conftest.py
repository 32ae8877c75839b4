"""The model path's tests: fixed ceilings (no measurement), kernels exported into a temporary
workspace; torch required."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tiny_models


@pytest.fixture(scope="module")
def model_ws(tmp_path_factory, hw):
    """A workspace, with ACCELOPT_CACHE_DIR holding fixed ceilings, for the module's tests."""
    pytest.importorskip("torch")
    from accelopt.hardware.cache import save_cpu_spec

    cache = tmp_path_factory.mktemp("model-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACCELOPT_CACHE_DIR", str(cache))
        save_cpu_spec(hw)
        yield tmp_path_factory.mktemp("model-ws")
