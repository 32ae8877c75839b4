"""`accelopt worker`'s node in the foreground (``cli.ray_node``), with a stand-in for `ray start`:
a stop signal is passed on, and nothing the node started outlives it. No Ray here (tests/ray has
the real node)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from accelopt.cli.ray_node import LOOPBACK_SWITCH, node_environment, run_node
from accelopt.cli.worker import ray_start_command

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and groups")

# A `ray start --block` that starts two processes of its own and writes their ids; on SIGTERM it
# exits at once (leaving them, as a node that stops badly would), or ignores it (ARGV[2] "deaf").
STAND_IN = """
import signal, subprocess, sys, time
if sys.argv[2] == "deaf":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            for _ in range(2)]
open(sys.argv[1], "w").write(" ".join(str(c.pid) for c in children))
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _stop_soon(pids_file: Path, signum: int, times: int = 1) -> threading.Thread:
    def send() -> None:
        deadline = time.monotonic() + 30
        while not pids_file.exists() or not pids_file.read_text():
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        for _ in range(times):
            os.kill(os.getpid(), signum)  # handled in this (the main) thread, by run_node
            time.sleep(0.3)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize(
    ("signum", "mode", "times"),
    [(signal.SIGTERM, "obeys", 1), (signal.SIGINT, "obeys", 1), (signal.SIGTERM, "deaf", 1),
     (signal.SIGINT, "deaf", 2)],
)  # fmt: skip
def test_a_stop_signal_stops_the_node_and_all_it_started(tmp_path, signum, mode, times):
    pids_file = tmp_path / "pids"
    command = [sys.executable, "-c", STAND_IN, str(pids_file), mode]
    sender = _stop_soon(pids_file, signum, times)
    start = time.monotonic()
    code = run_node(command, os.environ, grace_s=1.5)
    sender.join(5)
    assert code is None  # stopped by a signal, not failed
    assert time.monotonic() - start < 15
    children = [int(p) for p in pids_file.read_text().split()]
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in children if _alive(p)]
    assert signal.getsignal(signal.SIGTERM) is not None  # handlers put back


def test_a_node_that_ends_by_itself_gives_its_exit_status(tmp_path):
    assert run_node([sys.executable, "-c", "raise SystemExit(3)"], os.environ) == 3
    assert run_node([sys.executable, "-c", "pass"], os.environ) == 0


def test_the_environment_of_a_loopback_head():
    env = node_environment({"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "5"}, True, "127.0.0.1")
    assert env[LOOPBACK_SWITCH] == "0" and env["RAY_USAGE_STATS_ENABLED"] == "0"
    assert env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] == "5"  # the user's own, kept
    assert node_environment({}, True, "::1")[LOOPBACK_SWITCH] == "0"
    assert node_environment({}, True, None)["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] == "0"
    for head, ip in [(True, "10.0.0.5"), (True, None), (False, "127.0.0.1")]:
        assert LOOPBACK_SWITCH not in node_environment({}, head, ip)


def test_a_loopback_head_is_given_exactly_127_0_0_1():
    for given in ("localhost", "127.0.0.2", "::1"):
        command = ray_start_command(
            head=True, address=None, port=6390, devices={"cpu": 1}, node_ip_address=given
        )
        assert "--node-ip-address=127.0.0.1" in command
    joining = ray_start_command(
        head=False, address="h:1", port=1, devices={"cpu": 1}, node_ip_address="10.0.0.7"
    )
    assert "--node-ip-address=10.0.0.7" in joining


def test_the_dry_run_shows_the_variables_it_sets():
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    proc = subprocess.run(
        [sys.executable, "-m", "accelopt.cli.worker", "--head", "--node-ip-address", "localhost",
         "--dry-run"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"{LOOPBACK_SWITCH}=0 " in proc.stdout and "--node-ip-address=127.0.0.1" in proc.stdout
