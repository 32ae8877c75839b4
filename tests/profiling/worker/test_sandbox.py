"""What a worker does to itself: no network, a memory cap around kernel code, no core dumps, capped
files. Each check runs in a fresh subprocess, so this test process keeps its own limits."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.timeout(90)
def test_isolated_network_cannot_reach_the_hosts_loopback(unshare_permitted):
    if not unshare_permitted:
        pytest.skip("this machine does not permit unshare(CLONE_NEWNET), even in a user namespace")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = run_python(f"""
            import socket, sys
            from accelopt.profiling.worker import sandbox
            if not sandbox.isolate_network():
                sys.exit(3)
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
            except OSError as exc:
                print(type(exc).__name__)
                sys.exit(0)
            sys.exit(4)  # it connected
        """)
    assert probe.returncode == 0, probe.stdout + probe.stderr


@pytest.mark.timeout(90)
def test_reachable_without_isolation():
    # The control for the test above: the same connection works from a plain process.
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = run_python(f"""
            import socket
            socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
        """)
    assert probe.returncode == 0, probe.stderr


@pytest.mark.timeout(90)
def test_memory_cap_bounds_new_mappings_and_is_lifted_after():
    probe = run_python("""
        import mmap, resource
        from accelopt.profiling.worker import sandbox
        before = resource.getrlimit(resource.RLIMIT_AS)
        with sandbox.memory_cap(64 << 20) as cap:
            assert cap >= 64 << 20
            small = mmap.mmap(-1, 16 << 20)  # within the cap
            small.close()
            try:
                mmap.mmap(-1, 1 << 30)
            except OSError:
                pass
            else:
                raise SystemExit("1 GiB mapped under a 64 MiB cap")
        assert resource.getrlimit(resource.RLIMIT_AS) == before
        mmap.mmap(-1, 1 << 30).close()  # fine again once the cap is lifted
        print("ok")
    """)
    assert probe.returncode == 0 and probe.stdout.strip() == "ok", probe.stdout + probe.stderr


@pytest.mark.timeout(90)
def test_limit_process_disables_core_dumps_and_caps_files():
    probe = run_python("""
        import resource
        from accelopt.profiling.worker import sandbox
        sandbox.limit_process()
        assert resource.getrlimit(resource.RLIMIT_CORE) == (0, 0)
        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        assert soft != resource.RLIM_INFINITY and soft <= sandbox.MAX_FILE_BYTES
        print("ok")
    """)
    assert probe.returncode == 0 and probe.stdout.strip() == "ok", probe.stdout + probe.stderr


@pytest.mark.timeout(60)
def test_a_worker_exits_when_its_parent_dies(tmp_path):
    """A pool killed while its worker hangs in a kernel leaves no orphan: the worker's watchdog
    sees its parent go and exits."""
    pid_file = tmp_path / "child.pid"
    child = (
        "import time; from accelopt.profiling.worker.sandbox import watch_parent; "
        f"open({str(pid_file)!r}, 'w').write(str(__import__('os').getpid())); "
        "watch_parent(0.1); time.sleep(60)"
    )
    parent = (
        "import subprocess, sys, time; "
        f"subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(60)"
    )
    middle = subprocess.Popen([sys.executable, "-c", parent])
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    worker_pid = int(pid_file.read_text())
    middle.kill()
    middle.wait()
    deadline = time.monotonic() + 10
    while _alive(worker_pid):
        assert time.monotonic() < deadline, "the orphaned worker kept running"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited but is not reaped yet: it counts as gone.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"
