"""`accelopt worker --head` as a real process with a real Ray node: on 127.0.0.1 every port the
node opens listens on loopback only, and SIGTERM or SIGINT stops the node with every process it
started. The node's processes are the worker command's descendants, found in /proc."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from accelopt.cli.ray_node import LOOPBACK_SWITCH

pytest.importorskip("ray")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.ray,
    pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc (Linux)"),
]
LISTEN = "0A"  # the TCP state in /proc/net/tcp


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent) of ``pid``, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def _running(pid: int) -> bool:
    return (stat := _stat(pid)) is not None and stat[0] != "Z"


def _descendants(root: int) -> set[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            parents[int(entry.name)] = stat[1]
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_address)
    words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]  # each 32-bit word is host order
    address = ipaddress.ip_address(b"".join(words))
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def _listening(pids: set[int]) -> list[tuple[str, int, str]]:
    """(address, port, process) of each TCP socket that ``pids`` listen on."""
    owner = {}
    for pid in pids:
        with_fds = Path(f"/proc/{pid}/fd")
        for fd in with_fds.iterdir() if with_fds.exists() else []:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                owner[target[8:-1]] = _cmdline(pid).split(" ")[0]
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in owner:
                host, port = fields[1].split(":")
                found.append((str(_address(host)), int(port, 16), owner[fields[9]]))
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_head(temp: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    for name in (LOOPBACK_SWITCH, "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "RAY_ADDRESS"):
        env.pop(name, None)  # what the command sets itself
    command = [sys.executable, "-m", "accelopt.cli.worker", "--head", "--devices", "cpu:0",
               "--node-ip-address", "127.0.0.1", "--port", str(port),
               "--temp-dir", str(temp)]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)


def _wait_until_up(worker: subprocess.Popen[bytes], port: int, log: Path) -> set[int]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert worker.poll() is None, log.read_text()
        node = _descendants(worker.pid)
        names = " ".join(_cmdline(pid) for pid in node)
        ports = {p for _, p, _ in _listening(node)}
        if "Ray runtime started" in log.read_text() and "raylet" in names and port in ports:
            time.sleep(2)  # the agents the raylet starts open their ports too
            return _descendants(worker.pid)
        time.sleep(0.3)
    raise AssertionError(f"the node did not come up: {log.read_text()}")


def _survivors(node: dict[int, str], temp: Path) -> list[str]:
    left = [f"{pid} {cmd}" for pid, cmd in node.items() if _running(pid) and _cmdline(pid) == cmd]
    for entry in Path("/proc").iterdir():  # and anything else of that node's session files
        pid = int(entry.name) if entry.name.isdigit() else 0
        if pid and pid not in node and str(temp) in (cmd := _cmdline(pid)) and _running(pid):
            left.append(f"{pid} {cmd}")
    return left


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_loopback_head_listens_on_loopback_and_stops_whole(short_tmp, tmp_path, signum):
    temp, port, log = Path(tempfile.mkdtemp(dir=short_tmp)), _free_port(), tmp_path / "worker.log"
    worker = _start_head(temp, port, log)
    node: dict[int, str] = {}
    try:
        node = {pid: _cmdline(pid) for pid in _wait_until_up(worker, port, log)}
        listening = _listening(set(node))
        names = {name.rsplit("/", 1)[-1] for _, _, name in listening}
        assert {"gcs_server", "raylet"} <= names, listening
        exposed = [s for s in listening if not ipaddress.ip_address(s[0]).is_loopback]
        assert not exposed, f"listening beyond loopback: {exposed}"
        worker.send_signal(signum)
        worker.wait(30)
        deadline = time.monotonic() + 20
        while _survivors(node, temp) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _survivors(node, temp), log.read_text()[-3000:]
    finally:
        worker.kill()
        for pid, cmd in node.items():  # what this test started, should it have been left
            if _cmdline(pid) == cmd:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
