"""A busy machine for tests: CPU spinners and a memory-bandwidth hog, as separate processes.

    from busy import busy_machine

    with busy_machine() as load:
        print(load)  # "2 CPU spinners on each of CPUs 0-1, memory hog (2 × 64 MiB copies) on CPU 1"
        ...  # time something while the machine is busier than it has cores

``spinners_per_cpu`` spinners run on every CPU of this process's affinity mask, each pinned to
its CPU (``python -c`` with a plain loop: no import beyond the standard library, so they start in
tens of milliseconds), and with ``memory`` one more process, pinned to the last CPU, streams
copies between two ``mib`` MiB numpy arrays (``np.copyto``, far beyond any last-level cache).
The context manager waits until each has started (the spinners' first loop turn, the arrays
allocated and touched), yields a description, and kills and reaps them all when the block is
left, however it is left. None outlives its time: each checks a deadline (``limit_s`` after it
started; the spinners every 10^5 turns) and exits by itself, and each gets Linux's parent-death
signal, so a test process killed outright leaves no orphans. No pytest here: benchmarks and
scripts can use it too.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

READY_TIMEOUT_S = 30.0
SPIN_CHECK = 100_000  # loop turns between two looks at the clock

# The children's shared preamble: die with the parent, pin, then say "ready" on the pipe.
_PREAMBLE = """
import ctypes, os, signal, sys, time
deadline = time.monotonic() + float(sys.argv[1])
parent, cpu, ready = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
signal.signal(signal.SIGINT, signal.SIG_IGN)
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != parent:  # the parent died before the death signal was armed
    os._exit(0)
os.sched_setaffinity(0, {cpu})
"""
_SPINNER = (
    _PREAMBLE
    + f"""
os.write(ready, b"1")
os.close(ready)
n = 0
while True:
    n += 1
    if n % {SPIN_CHECK} == 0 and time.monotonic() > deadline:
        break
"""
)
_MEMORY = (
    _PREAMBLE
    + """
import numpy as np
count = int(sys.argv[5]) * 2**20 // 4
a = np.ones(count, dtype=np.float32)
b = np.zeros(count, dtype=np.float32)  # zeros may map lazily: touch it now
np.copyto(b, a)
os.write(ready, b"1")
os.close(ready)
while time.monotonic() < deadline:
    np.copyto(b, a)
    np.copyto(a, b)
"""
)


@dataclass
class BusyProcess:
    kind: str  # "cpu" or "memory"
    cpu: int
    process: subprocess.Popen[bytes]


class Load(str):
    """The description ``busy_machine`` yields: a string, with the processes' ids and CPUs."""

    pids: tuple[int, ...]
    cpus: tuple[int, ...]  # each process's CPU, in the order of ``pids``
    kinds: tuple[str, ...]  # "cpu" or "memory", in the order of ``pids``

    def __new__(cls, text: str, processes: list[BusyProcess]) -> Load:
        load = super().__new__(cls, text)
        load.pids = tuple(p.process.pid for p in processes)
        load.cpus = tuple(p.cpu for p in processes)
        load.kinds = tuple(p.kind for p in processes)
        return load


@dataclass
class BusyMachine:
    """The processes started; ``describe()`` is what ``busy_machine`` yields."""

    processes: list[BusyProcess] = field(default_factory=list)
    spinners_per_cpu: int = 0
    mib: int = 0

    def describe(self) -> Load:
        parts = []
        spinning = sorted({p.cpu for p in self.processes if p.kind == "cpu"})
        if spinning:
            n = self.spinners_per_cpu
            where = (
                f"CPU {spinning[0]}" if len(spinning) == 1 else f"each of CPUs {_ranges(spinning)}"
            )
            parts.append(f"{n} CPU spinner{'s' if n > 1 else ''} on {where}")
        parts += [f"memory hog (2 × {self.mib} MiB copies) on CPU {p.cpu}"
                  for p in self.processes if p.kind == "memory"]  # fmt: skip
        return Load(", ".join(parts) or "nothing running", self.processes)


def _ranges(cpus: list[int]) -> str:
    """``0-3,6``, as ``taskset -c`` writes CPU lists."""
    groups: list[list[int]] = []
    for c in cpus:
        if groups and groups[-1][-1] == c - 1:
            groups[-1].append(c)
        else:
            groups.append([c])
    return ",".join(str(g[0]) if len(g) == 1 else f"{g[0]}-{g[-1]}" for g in groups)


def _spawn(kind: str, cpu: int, limit_s: float, mib: int) -> tuple[BusyProcess, int]:
    read_fd, write_fd = os.pipe()
    code = _SPINNER if kind == "cpu" else _MEMORY
    args = [str(limit_s), str(os.getpid()), str(cpu), str(write_fd), str(mib)]
    try:
        process = subprocess.Popen(
            [sys.executable, "-S" if kind == "cpu" else "-s", "-c", code, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(write_fd,),
            start_new_session=True,  # Ctrl-C reaches the test only; it stops them
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return BusyProcess(kind, cpu, process), read_fd


def _wait_ready(busy: BusyProcess, read_fd: int, deadline: float) -> None:
    try:
        ready, _, _ = select.select([read_fd], [], [], max(0.0, deadline - time.monotonic()))
        started = bool(ready) and os.read(read_fd, 1) == b"1"
    finally:
        os.close(read_fd)
    if not started:
        if busy.process.poll() is None:
            busy.process.kill()
        err = busy.process.communicate()[1].decode(errors="replace").strip()
        raise RuntimeError(f"{busy.kind} hog on CPU {busy.cpu} did not start: "
                           f"{err[-400:] or 'timed out'}")  # fmt: skip


def _stop(busy: BusyProcess) -> None:
    if busy.process.poll() is None:
        with suppress(ProcessLookupError):
            busy.process.kill()
    busy.process.wait()
    if busy.process.stderr:
        busy.process.stderr.close()


@contextmanager
def busy_machine(
    spinners_per_cpu: int = 2, memory: bool = True, limit_s: float = 120.0, mib: int = 64
) -> Iterator[Load]:
    """Keep every CPU of the affinity mask busy (and, with ``memory``, the memory bus) while the
    block runs; yields a description of the load (a ``str``, with ``pids``, ``cpus`` and
    ``kinds``). Every process exits by itself after ``limit_s`` seconds. RuntimeError when one
    fails to start."""
    machine = _start(spinners_per_cpu, memory, limit_s, mib)
    try:
        yield machine.describe()
    finally:
        for busy in machine.processes:
            _stop(busy)


def _start(spinners_per_cpu: int, memory: bool, limit_s: float, mib: int) -> BusyMachine:
    """Start the memory hog and wait for it (its arrays are ready sooner on CPUs nobody spins
    on), then start the spinners together and wait for each; a failure stops those started."""
    mask = sorted(os.sched_getaffinity(0))
    machine = BusyMachine(spinners_per_cpu=spinners_per_cpu, mib=mib if memory else 0)
    waves = [[("memory", mask[-1])] if memory else []]
    waves.append([("cpu", c) for c in mask for _ in range(spinners_per_cpu)])
    pending: list[tuple[BusyProcess, int]] = []
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        for wave in waves:
            for kind, cpu in wave:
                pending.append(_spawn(kind, cpu, limit_s, mib))
                machine.processes.append(pending[-1][0])
            while pending:
                _wait_ready(*pending.pop(0), deadline)
    except BaseException:
        for _, read_fd in pending:
            os.close(read_fd)
        for busy in machine.processes:
            _stop(busy)
        raise
    return machine
