"""Fixtures shared across the test packages: a private cache, fixed ceilings, and the real
command line run in a subprocess with both."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# support/specs.py (make_spec, the one factory of test ceilings), importable as `specs` everywhere
sys.path.insert(0, str(Path(__file__).parent / "support"))

from specs import make_spec

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
    return make_spec()


# This machine's ceilings for the command-line tests (tests/cli asserts the name and bandwidth).
FIXED_SPEC = make_spec(
    name="cpu:test",
    vector_rate=520e9,
    bandwidth=45e9,
    arch="x86_64",
    isa=("sse4_2", "avx", "avx2", "fma"),
    vector_bits=256,
    l1d_bytes=32 << 10,
    l2_bytes=512 << 10,
    provenance={"matmul_rate": "fixed for tests"},
)

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    cache = tmp_path_factory.mktemp("cache")
    env = {**os.environ, "ACCELOPT_CACHE_DIR": str(cache), "COLUMNS": "200"}
    # Seed this machine's ceilings so no test depends on a measurement.
    script = (
        "from accelopt.hardware.cache import save_cpu_spec; import sys, json;"
        "from accelopt.hardware.spec import HardwareSpec;"
        "save_cpu_spec(HardwareSpec.model_validate_json(sys.stdin.read()))"
    )
    subprocess.run(
        [sys.executable, "-c", script], input=FIXED_SPEC.model_dump_json(), env=env, check=True,
        text=True,
    )  # fmt: skip
    return env


@pytest.fixture(scope="module")
def run_cli(cli_env: dict[str, str]) -> Run:
    def run(
        *args: str | Path, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "accelopt", *map(str, args)],
            capture_output=True,
            text=True,
            env={**cli_env, **(env or {})},
            timeout=300,
        )

    return run
