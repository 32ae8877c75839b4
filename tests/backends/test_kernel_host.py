"""The kernel's own process (``backends/cpu/kernel_host.c``) against hostile kernels.

These kernels are compiled straight with gcc, past every source and object check: they stand for
a kernel that got arbitrary code running (the checks are a first fence, not the sandbox). Each
attempt must end as the kernel's failure, with a sentence naming the cause, and harm nothing:
no file, no connection, no process left, no signal delivered, no forged answer accepted.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attacks
import numpy as np
import pytest

from accelopt import settings
from accelopt.backends.base import KernelError
from accelopt.backends.cpu.remote import KernelHostDevice, probe_isolation
from accelopt.backends.status import Status
from accelopt.hardware.toolchain import compiler_for

N = 1024
HEAD = "#define _GNU_SOURCE\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n"
SILU = "for (int i = 0; i < N; i++) y[i] = x[i] / (1.0f + __builtin_expf(-x[i]));\n"


def unchecked(tmp_path: Path, body: str, includes: str = "") -> Path:
    """``kernel(x, y)`` around ``body``, built by gcc with no check of any kind."""
    source = tmp_path / "hostile.c"
    source.write_text(f"{HEAD}{includes}\nvoid kernel(const float *x, float *y) {{\n{body}\n}}\n")
    target = tmp_path / "hostile.so"
    cmd = ["gcc", "-O1", "-fopenmp", "-shared", "-fPIC", f"-DN={N}", "-o", str(target), str(source)]
    cmd.append("-lm")
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return target


@pytest.fixture
def device(accelopt_cache) -> Iterator[KernelHostDevice]:
    dev = KernelHostDevice(compiler_for(settings.c_compiler()), os.environ)
    yield dev
    dev.close()


def running_commands(fragment: str) -> list[str]:
    """The command lines of the processes on this machine that contain ``fragment``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fragment in line:
            found.append(line)
    return found


def run_once(device: KernelHostDevice, artifact: Path) -> np.ndarray:
    x = device.upload(np.linspace(-3, 3, N, dtype=np.float32), into=device.empty((N,)))
    y = device.empty((N,), fill=np.nan)
    kernel = device.load(artifact, 2, threads=2, memory_cap_bytes=1 << 30)
    kernel([x, y])
    return device.to_host(y)


def assert_refused(device: KernelHostDevice, artifact: Path, *syscalls: str) -> KernelError:
    with pytest.raises(KernelError) as caught:
        run_once(device, artifact)
    assert caught.value.status is Status.REJECTED, caught.value
    assert "system call the sandbox forbids" in str(caught.value)
    assert any(f"({name} (" in str(caught.value) for name in syscalls), str(caught.value)
    assert device.host.proc.poll() is not None  # the process is gone
    return caught.value


def test_an_honest_kernel_runs_and_the_sandbox_is_in_force(device, tmp_path):
    y = run_once(device, unchecked(tmp_path, SILU + 'printf("hello from the kernel\\n");',
                                   "#include <stdio.h>"))  # fmt: skip
    x = np.linspace(-3, 3, N, dtype=np.float32)
    np.testing.assert_allclose(y, x / (1 + np.exp(-x)), rtol=1e-5)
    assert device.isolation["seccomp"] == "1" and device.isolation["seccomp_load"] == "1"
    if os.geteuid() == 0:  # root's kernels run as nobody, or as root with no capability left
        assert device.isolation["privileges"] in {"nobody", "root-without-capabilities"}


def test_probe_reports_what_the_system_applies(accelopt_cache):
    facts = probe_isolation(compiler_for(settings.c_compiler()), os.environ)
    assert facts["seccomp"] == "1" and facts["no_new_privs"] == "1"


def test_creating_a_file_is_refused(device, tmp_path):
    target = tmp_path / "escaped.txt"
    artifact = attacks.build(tmp_path, "creates_file", PATH=f'"{target}"')
    assert_refused(device, artifact, "openat")
    assert not target.exists()


def test_reading_the_parents_environment_is_refused(device, tmp_path):
    assert_refused(device, attacks.build(tmp_path, "reads_parent_environ"), "openat")


def test_the_network_is_refused(device, tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    assert_refused(device, attacks.build(tmp_path, "connects", PORT=port), "socket")
    with pytest.raises(TimeoutError):
        server.accept()  # nobody connected
    server.close()


def test_starting_a_process_is_refused_and_nothing_outlives_the_kernel(device, tmp_path):
    marker = tmp_path / "ran.txt"
    artifact = attacks.build(tmp_path, "starts_process", MARKER=f'"{marker}"')
    error = assert_refused(device, artifact, "clone", "clone3", "rt_sigaction", "vfork")
    assert "start processes" in str(error)
    assert not marker.exists()
    assert not running_commands(f"touch {marker}")  # no such process anywhere


def test_fork_is_refused(device, tmp_path):
    assert_refused(device, attacks.build(tmp_path, "forks"), "clone")


def test_signalling_the_worker_is_refused(device, tmp_path):
    assert_refused(device, attacks.build(tmp_path, "signals_worker"), "kill")


def test_entering_another_namespace_is_refused(device, tmp_path):
    assert_refused(device, attacks.build(tmp_path, "enters_namespace"), "setns")


def test_writing_to_any_other_descriptor_is_refused(device, tmp_path):
    # The worker's channel to its parent is not even open here; every descriptor but the log is
    # out of bounds.
    assert_refused(device, attacks.build(tmp_path, "writes_other_descriptors"), "write")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 machine code")
def test_raw_system_calls_from_executable_memory_are_refused(device, tmp_path):
    # mov eax, 41 (socket); mov edi, 2; mov esi, 1; xor edx, edx; syscall; ret
    assert_refused(device, attacks.build(tmp_path, "raw_syscall"), "socket")


def test_a_forged_done_answer_is_caught(device, tmp_path):
    # The kernel host's argv ends with its "done" descriptor, just below the environment on the
    # initial stack: the kernel answers for itself, then computes.
    with pytest.raises(KernelError) as caught:
        run_once(device, attacks.build(tmp_path, "forges_done"))
    assert caught.value.status is Status.REJECTED
    assert "harness's channel" in str(caught.value)


def test_the_kernel_process_holds_no_descriptor_but_its_own(device, accelopt_cache):
    # The worker holds the device lock and its channel to the parent while it starts the kernel's
    # process: neither may be inherited (a child holding the lock blocked the machine).
    from accelopt.hardware import devicelock

    with devicelock.shared(devicelock.lock_path("cpu")):
        dev = KernelHostDevice(compiler_for(settings.c_compiler()), os.environ)
        try:
            fds = os.listdir(f"/proc/{dev.host.pid}/fd")
            targets = {os.readlink(f"/proc/{dev.host.pid}/fd/{fd}") for fd in fds}
        finally:
            dev.close()
    assert len(fds) == 6  # stdin, the log twice, the set-up socket, the two pipes
    assert not any(t.endswith(".lock") for t in targets)


def test_the_parent_is_not_dumpable_once_it_evaluates():
    import ctypes

    from accelopt.profiling.parent.environment import protect_parent

    protect_parent()
    libc = ctypes.CDLL(None)
    assert libc.prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE: its /proc files are closed to peers


_WITHOUT_PTRACE = """
import ctypes, os, sys
import numpy as np
libc = ctypes.CDLL(None, use_errno=True)
class Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
class Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]
if libc.prctl(24, 19, 0, 0, 0) != 0:  # PR_CAPBSET_DROP CAP_SYS_PTRACE, as Docker does
    sys.exit(77)  # this root may not change its bounding set (no CAP_SETPCAP)
header, data = Header(0x20080522, 0), (Data * 2)()
assert libc.capget(ctypes.byref(header), data) == 0
data[0].effective &= ~(1 << 19)
data[0].permitted &= ~(1 << 19)
assert libc.capset(ctypes.byref(header), data) == 0
from accelopt import settings
from accelopt.hardware.toolchain import compiler_for
from accelopt.backends.cpu.remote import KernelHostDevice
device = KernelHostDevice(compiler_for(settings.c_compiler()), os.environ)
x = device.upload(np.linspace(-3, 3, 1024, dtype=np.float32), into=device.empty((1024,)))
y = device.empty((1024,), fill=np.nan)
kernel = device.load(sys.argv[1], 2, threads=1, memory_cap_bytes=1 << 30)
kernel([x, y])
assert not np.isnan(device.to_host(y)).any()
print(device.isolation["privileges"], device.isolation["seccomp"])
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="simulates a container's root: needs root")
def test_a_root_worker_without_cap_sys_ptrace_still_reaches_its_kernel(tmp_path, accelopt_cache):
    # Docker's root has no CAP_SYS_PTRACE: a kernel process turned nobody would be out of the
    # worker's reach, so it stays uid 0 and drops every capability instead.
    artifact = unchecked(tmp_path, SILU)
    script = tmp_path / "without_ptrace.py"
    script.write_text(_WITHOUT_PTRACE)
    run = subprocess.run(
        [sys.executable, str(script), str(artifact)], capture_output=True, text=True, timeout=120
    )
    if run.returncode == 77:
        pytest.skip("this root cannot drop a capability from its bounding set")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["root-without-capabilities", "1"]


def test_a_replaced_executor_binary_is_built_again_not_run(accelopt_cache, tmp_path):
    from accelopt.backends.cpu.kernel_process import host_binary

    cc = compiler_for(settings.c_compiler())
    import hashlib

    binary = host_binary(cc)
    forged = b"#!/bin/sh\necho forged\n"
    binary.chmod(0o755)
    binary.write_bytes(forged)
    host_binary.cache_clear()
    try:
        rebuilt = host_binary(cc).read_bytes()
    finally:
        host_binary.cache_clear()
    assert rebuilt != forged and rebuilt[:4] == b"\x7fELF"
    recorded = binary.with_suffix(".sha256").read_text().strip()
    assert recorded == hashlib.sha256(rebuilt).hexdigest()
