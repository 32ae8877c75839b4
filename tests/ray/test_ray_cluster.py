"""Ray in other processes: a local instance the profiler starts and stops by itself, and a
cluster started by ``accelopt worker --head`` whose head dies in the middle of a batch."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

DRIVER = Path(__file__).with_name("cluster_driver.py")
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.2)
    raise AssertionError(f"no Ray head on port {port} after {timeout} s")


def driver(env: dict[str, str], *args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, str(DRIVER), *args], env=env, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def ray_env(accelopt_cache: Path, short_tmp: Path) -> dict[str, str]:
    tmp = tempfile.mkdtemp(dir=short_tmp)  # Ray's socket paths must stay short
    return {**os.environ, **RAY_ENV, "ACCELOPT_CACHE_DIR": str(accelopt_cache),
            "RAY_TMPDIR": str(tmp)}  # fmt: skip


@pytest.mark.timeout(180)
def test_without_an_address_a_local_instance_is_started_and_shut_down(ray_env, tmp_path):
    result = driver(ray_env, "local", str(tmp_path / "workspace"))
    assert result == {"started": True, "status": "PASSED", "after": False}


@pytest.mark.timeout(240)
def test_a_lost_cluster_ends_in_one_sentence_and_keeps_what_finished(ray_env, tmp_path):
    port = free_port()
    temp_dir = Path(ray_env["RAY_TMPDIR"]) / "head"
    log = (tmp_path / "head.log").open("w")
    head = subprocess.Popen(
        [sys.executable, "-m", "accelopt.cli.worker", "--head", f"--port={port}",
         "--node-ip-address=127.0.0.1", f"--temp-dir={temp_dir}"],
        env=ray_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for_port(port, 60)
        result = driver(ray_env, "lost", f"127.0.0.1:{port}", str(head.pid), str(tmp_path / "ws"))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)
        head.wait()
        log.close()
    message = str(result["message"])
    assert message.startswith(f"lost the Ray cluster at 127.0.0.1:{port}"), message
    assert "\n" not in message and "did not run" in message
    received = sorted(result["received"])  # type: ignore[arg-type]
    assert 2 <= len(received) < 12
    assert result["cached"] == received  # every result handed over is in the cache
