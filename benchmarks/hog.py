"""Load for the benchmarks: a CPU spinner and a memory-bandwidth hog, each a separate process
pinned to one CPU, started and stopped by a context manager:

    from hog import hogs

    with hogs(cpu=True, memory=True) as load:
        print(load.describe())  # "CPU spinner on CPU 0, memory hog (2 × 256 MiB copies) on CPU 1"
        ...  # the hogs run until the block is left, also by an exception or Ctrl-C

The memory hog runs on the last CPU of this process's affinity mask and copies between two
256 MiB float32 arrays (``np.copyto``, far beyond any last-level cache) in a loop, so one core
streams as much memory traffic as it can. The spinner (``while True: pass``) runs on the CPU
before it where there are two or more, else on the same one. Both print nothing; ``hogs`` waits
until each is running (the arrays allocated and touched) before it enters the block, and kills
and reaps them when it leaves. They also die with the process that started them (Linux's parent
death signal), so a benchmark killed by SIGKILL leaves no orphans; SIGTERM to the benchmark
leaves the block through its ``finally``. Run alone for a look (``ps``), stopped by Ctrl-C:

    python benchmarks/hog.py [--cpu] [--memory] [--mib 256]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

READY_TIMEOUT_S = 60.0
PR_SET_PDEATHSIG = 1


@dataclass
class Hog:
    kind: str  # "cpu" or "memory"
    cpu: int
    process: subprocess.Popen[bytes]
    mib: int = 0

    def describe(self) -> str:
        if self.kind == "cpu":
            return f"CPU spinner on CPU {self.cpu}"
        return f"memory hog (2 × {self.mib} MiB copies) on CPU {self.cpu}"


@dataclass
class Load:
    hogs: list[Hog] = field(default_factory=list)

    def describe(self) -> str:
        return ", ".join(h.describe() for h in sorted(self.hogs, key=lambda h: h.kind)) or "no hogs"

    @property
    def kinds(self) -> str:
        """``cpu``, ``memory``, ``cpu+memory`` or ``none``."""
        return "+".join(sorted(h.kind for h in self.hogs)) or "none"

    def died(self) -> list[str]:
        """The hogs that stopped by themselves (their results would not be under load)."""
        return [f"{h.describe()} (exit {h.process.returncode})" for h in self.hogs
                if h.process.poll() is not None]  # fmt: skip


def cpus() -> list[int]:
    """This process's affinity mask, sorted."""
    return sorted(os.sched_getaffinity(0))


def placement(cpu: bool, memory: bool) -> dict[str, int]:
    """Each hog's CPU: the memory hog's the last one, the spinner's another where there is one."""
    mask = cpus()
    where: dict[str, int] = {}
    if memory:
        where["memory"] = mask[-1]
    if cpu:
        where["cpu"] = mask[-2] if memory and len(mask) >= 2 else mask[-1]
    return where


def _start(kind: str, cpu: int, mib: int) -> Hog:
    read_fd, write_fd = os.pipe()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--pin", str(cpu),
           "--mib", str(mib), "--ready-fd", str(write_fd),
           "--parent", str(os.getpid())]  # fmt: skip
    try:
        process = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(write_fd,),
            start_new_session=True,  # Ctrl-C reaches the benchmark only; it stops the hogs
        )
    finally:
        os.close(write_fd)
    hog = Hog(kind, cpu, process, mib if kind == "memory" else 0)
    try:
        ready, _, _ = select.select([read_fd], [], [], READY_TIMEOUT_S)
        signalled = bool(ready) and os.read(read_fd, 1) == b"1"
    finally:
        os.close(read_fd)
    if not signalled:
        if process.poll() is None:
            process.kill()
        err = process.communicate()[1].decode(errors="replace").strip()
        raise RuntimeError(f"{hog.describe()} did not start: {err[-400:] or 'timed out'}")
    return hog


def _stop(hog: Hog) -> None:
    if hog.process.poll() is None:
        hog.process.kill()
    hog.process.wait()
    if hog.process.stderr:
        hog.process.stderr.close()


class _Terminated(SystemExit):
    pass


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated(128 + signum)


@contextlib.contextmanager
def hogs(cpu: bool = False, memory: bool = False, mib: int = 256) -> Iterator[Load]:
    """Run the chosen hogs for the duration of the block; they are killed when it is left.

    Raises RuntimeError when a hog fails to start, or (on a normal exit) when one stopped early.
    """
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    load = Load()
    try:
        for kind, where in sorted(placement(cpu, memory).items(), reverse=True):
            load.hogs.append(_start(kind, where, mib))  # memory first: its CPU is the last
        yield load
        died = load.died()
        if died:
            raise RuntimeError(f"hog stopped during the run: {'; '.join(died)}")
    finally:
        for hog in load.hogs:
            _stop(hog)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


# --- the hog processes themselves ---------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(0)


def _child(kind: str, cpu: int, mib: int, ready_fd: int, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    os.sched_setaffinity(0, {cpu})
    if kind == "memory":
        import numpy as np

        n = mib * 2**20 // 4
        a = np.ones(n, dtype=np.float32)
        b = np.zeros(n, dtype=np.float32)  # zeros may map lazily: touch it now
        np.copyto(b, a)
        os.write(ready_fd, b"1")
        os.close(ready_fd)
        while True:
            np.copyto(b, a)
            np.copyto(a, b)
    os.write(ready_fd, b"1")
    os.close(ready_fd)
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run the CPU spinner")
    parser.add_argument("--memory", action="store_true", help="run the memory hog")
    parser.add_argument("--mib", type=int, default=256, help="size of each of the two arrays")
    parser.add_argument("--child", choices=("cpu", "memory"), help=argparse.SUPPRESS)
    parser.add_argument("--pin", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.pin, args.mib, args.ready_fd, args.parent)
        return
    if not (args.cpu or args.memory):
        args.cpu = args.memory = True
    with hogs(cpu=args.cpu, memory=args.memory, mib=args.mib) as load:
        print(f"{load.describe()}; Ctrl-C stops", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(1)


if __name__ == "__main__":
    main()
