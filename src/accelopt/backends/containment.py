"""How contained a kernel's own process is (a C kernel's ``kernel_host.c``, a Triton kernel's
``triton/host.py``): how it gives up root, and what every one of its threads must show in /proc
before any kernel call (the process applies the layers; the worker, which the kernel cannot
forge, reads them back)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from accelopt.backends.base import KernelError
from accelopt.backends.status import Status

DROP_NONE, DROP_TO_NOBODY, DROP_CAPABILITIES = 0, 1, 2
CAP_SYS_PTRACE = 19


def drop_mode() -> int:
    """How a kernel process gives up root (kernel_host.c): not at all for a non-root worker; to
    nobody where this worker can still reach another user's memory (CAP_SYS_PTRACE); else (a
    container's root without CAP_SYS_PTRACE) by dropping every capability and keeping uid 0."""
    if os.geteuid() != 0:
        return DROP_NONE
    try:
        with open("/proc/self/status") as f:
            line = next(x for x in f if x.startswith("CapEff:"))
        effective = int(line.split()[1], 16)
    except (OSError, StopIteration, ValueError):
        return DROP_CAPABILITIES
    return DROP_TO_NOBODY if effective >> CAP_SYS_PTRACE & 1 else DROP_CAPABILITIES


NOBODY = 65534
_TASK_FIELDS = (
    "Uid",
    "Gid",
    "NoNewPrivs",
    "Seccomp",
    "Seccomp_filters",
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
)
FILTERS = 2  # the loader's, then the compute one (kernel_host.c)


def task_status(pid: int) -> dict[int, dict[str, str]]:
    """The containment fields of /proc/PID/task/TID/status for every thread of the process
    (read by this process, which the kernel cannot forge; a thread that ended meanwhile is
    left out)."""
    tasks: dict[int, dict[str, str]] = {}
    for entry in sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda e: int(e.name)):
        try:
            lines = (entry / "status").read_text().splitlines()
        except OSError:
            continue
        fields = dict(line.partition(":")[::2] for line in lines)
        tasks[int(entry.name)] = {
            k: " ".join(fields[k].split()) for k in _TASK_FIELDS if k in fields
        }
    return tasks


def expected_task(facts: Mapping[str, str], mode: int) -> dict[str, str]:
    """What every thread must show: its filters (``filters`` in the facts, else both of a C
    kernel's where the loader's and the compute one were installed), no_new_privs, and for a
    root worker no capability at all and nobody's ids (or root's, capability-less)."""
    want = {"NoNewPrivs": "1"}
    filters = facts.get("filters") or (str(FILTERS) if facts.get("seccomp_load") == "1" else "")
    if facts.get("seccomp") == "1" and filters:
        want |= {"Seccomp": "2", "Seccomp_filters": filters}
    if mode != DROP_NONE:
        want |= {cap: "0" * 16 for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
        ids = NOBODY if mode == DROP_TO_NOBODY else 0
        want |= {"Uid": " ".join([str(ids)] * 4), "Gid": " ".join([str(ids)] * 4)}
    return want


def every_thread(pid: int, facts: Mapping[str, str], mode: int) -> dict[str, str]:
    """Check every thread of the kernel's process (``check_tasks``) before any kernel call."""
    return check_tasks(task_status(pid), pid, facts, mode)


def check_tasks(
    tasks: Mapping[int, Mapping[str, str]], pid: int, facts: Mapping[str, str], mode: int
) -> dict[str, str]:
    """No thread may be less contained than the main thread, nor than ``expected_task``. The
    facts to report (``tasks`` and the fields all threads share); a KernelError (REJECTED)
    naming the first thread that falls short."""
    main = tasks.get(pid)
    if main is None:
        raise KernelError("the kernel's process has no main thread to check", Status.CRASH)
    want = {k: v for k, v in (dict(main) | expected_task(facts, mode)).items() if k in main}
    for tid, fields in tasks.items():
        short = {k: fields.get(k, "?") for k, v in want.items() if fields.get(k) != v}
        if short:
            found = ", ".join(f"{k} {v} where {want[k]} is required" for k, v in short.items())
            raise KernelError(
                f"thread {tid} of the kernel's process is less contained than it must be "
                f"({found}); the kernel was not run",
                Status.REJECTED,
            )
    shared = {f"tasks_{k.lower()}": v.replace(" ", ",") for k, v in want.items()}
    return {"tasks": str(len(tasks)), **shared}


def end_process(proc: subprocess.Popen[bytes], fds: Sequence[int]) -> None:
    """Kill a kernel's process (SIGKILL: every thread, whatever it does), reap it, and close the
    worker's ends of its pipes ``fds``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def log_tail(limit: int = 400) -> str:
    """The end of what a kernel's process wrote to its stderr: the evaluation's log (in a
    worker, its stdout and stderr are that file, opened write-only: read through a new
    descriptor of it)."""
    try:
        fd = os.open("/proc/self/fd/2", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, limit, max(0, size - limit)).decode(errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
