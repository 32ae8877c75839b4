"""The Ray node of ``accelopt worker``, in the foreground: its environment, and stopping it whole.

``ray start --block`` runs in a session of its own, so that the node's processes (GCS, raylet,
agents, workers) share one process group that is not this command's: a terminal's Ctrl-C reaches
this command only, and nothing of the node outlives it. SIGTERM, SIGINT or SIGHUP here is passed on
to ``ray start`` as SIGTERM, which stops the node's processes; a second one, or ``STOP_GRACE_S``
without ``ray start`` having exited, kills the group. Once ``ray start`` has exited (left unreaped
meanwhile, so that its process group cannot be reused), whatever is left of the group is killed.
If this command is killed outright (SIGKILL), Linux sends ``ray start`` SIGTERM (its parent-death
signal), and it stops the node itself.

A head on a loopback address (``--node-ip-address 127.0.0.1``) listens on loopback only: Ray's
servers bind 127.0.0.1 when the node's address is exactly that, but ``ray start`` replaces a
loopback address with the machine's routable one unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
(Ray's switch for single-machine clusters), which is set for such a head. A driver on the machine
then connects with the same variable set (Ray would otherwise turn ``127.0.0.1:PORT`` into the
routable address, where nothing listens).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STOP_GRACE_S = 20.0  # for `ray start` to stop the node before its process group is killed
LOOPBACK_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray keeps 127.0.0.1 as it is
POLL_S = 0.1


def is_loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def node_environment(base: Mapping[str, str], head: bool, node_ip: str | None) -> dict[str, str]:
    """The environment of ``ray start``: no usage statistics unless asked for, no drain on SIGTERM
    (Ray waits up to 30 s for Serve replicas by default; accelopt retries lost work itself), and
    for a head on loopback, Ray's single-machine switch."""
    env = dict(base)
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")
    if head and is_loopback(node_ip):
        env[LOOPBACK_SWITCH] = "0"
    return env


def run_node(
    command: list[str], env: Mapping[str, str], grace_s: float = STOP_GRACE_S
) -> int | None:
    """Run ``command`` (``ray start --block``) until it exits or this process is told to stop;
    its exit status, or None when it was stopped by a signal. Nothing it started is left."""
    process = subprocess.Popen(
        command, env=dict(env), start_new_session=True, preexec_fn=_die_with_parent
    )
    stop = _Stop(process.pid)
    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        _wait_unreaped(process, stop, grace_s)
    finally:
        _kill_group(process.pid, signal.SIGKILL)  # what is left of the node, ray start included
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        code = process.wait()
    return None if stop.received else code


class _Stop:
    """The stop signals' handler: the first passes SIGTERM on to ``ray start``, the next kills its
    process group."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.received: list[int] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if len(self.received) == 1:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
        else:
            _kill_group(self.pid, signal.SIGKILL)


def _wait_unreaped(process: subprocess.Popen[bytes], stop: _Stop, grace_s: float) -> None:
    """Until ``process`` has exited (not reaped: its process group stays reserved) or ``grace_s``
    after the first stop signal."""
    deadline: float | None = None
    while not _exited(process):
        if stop.received and deadline is None:
            deadline = time.monotonic() + grace_s
        if deadline is not None and time.monotonic() >= deadline:
            return
        time.sleep(POLL_S)


def _exited(process: subprocess.Popen[bytes]) -> bool:
    if hasattr(os, "waitid"):  # look without reaping
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        return os.waitid(os.P_PID, process.pid, flags) is not None
    return process.poll() is not None  # macOS: reaped, so the group's id is no longer held


def _kill_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _die_with_parent() -> None:
    """In the child before ``exec``: SIGTERM when this command dies (Linux; elsewhere nothing)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
