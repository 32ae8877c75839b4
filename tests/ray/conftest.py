"""One local Ray instance per test module (``ray_cluster``), with what every Ray test needs: no
token authentication, no usage statistics, session files under the test's tmp path, the node on
127.0.0.1, and three ``accelopt_cpu`` devices (so two actors, a replacement, and one more fit)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from accelopt.backends.kernel import Kernel

KERNELS_DIR = Path(__file__).parents[1] / "profiling" / "kernels"
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="session")
def kernel_named() -> Callable[[str], Kernel]:
    """``kernel_named("segfault")``: the kernel in tests/profiling/kernels/segfault.c."""

    def load(name: str) -> Kernel:
        return Kernel((KERNELS_DIR / f"{name}.c").read_text(), "cpu", name)

    return load


@pytest.fixture(scope="session")
def short_tmp() -> Iterator[Path]:
    """A folder whose paths stay short: Ray's socket paths (``session_.../sockets/plasma_store``
    below its temp dir) must fit AF_UNIX's 107 bytes, which pytest's tmp tree overruns under
    pytest-xdist (``.../popen-gw1/...``)."""
    path = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_cluster(accelopt_cache: Path, short_tmp: Path) -> Iterator[Any]:
    ray = pytest.importorskip("ray")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in RAY_ENV.items():
            mp.setenv(name, value)
        ray.init(
            include_dashboard=False,
            num_cpus=1,
            resources={"accelopt_cpu": 3},
            _temp_dir=tempfile.mkdtemp(dir=short_tmp),
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
        assert os.environ["ACCELOPT_CACHE_DIR"] == str(accelopt_cache)  # the actors inherit it
        try:
            yield ray
        finally:
            ray.shutdown()
