"""Load for the benchmarks: CPU spinners and a memory-bandwidth hog, each a separate process
pinned to one CPU, started and stopped by a context manager:

    from hog import hogs

    with hogs(cpu=True, memory=True) as load:
        print(load.describe())  # "CPU spinner on CPU 0, memory hog (2 × 256 MiB copies) on CPU 1"
        ...  # the hogs run until the block is left, also by an exception or Ctrl-C

    with hogs(cpu=True, memory=True, spinners_per_cpu=2) as load:
        print(load.describe())  # "2 CPU spinners on each of CPUs 0-1, memory hog (...) on CPU 1"

The memory hog runs on the last CPU of this process's affinity mask and copies between two
256 MiB float32 arrays (``np.copyto``, far beyond any last-level cache) in a loop, so one core
streams as much memory traffic as it can. By default one spinner (``while True: pass``) runs, on
the CPU before it where there are two or more, else on the same one; with ``spinners_per_cpu=N``
N spinners run on every CPU of the affinity mask instead (the memory hog's too), each pinned to
its CPU: a machine busier than it has cores. None prints anything; ``hogs`` starts them all,
waits until each is running (the arrays allocated and touched) before it enters the block, and
kills and reaps them when it leaves. They also die with the process that started them (Linux's
parent death signal), so a benchmark killed by SIGKILL leaves no orphans; SIGTERM to the
benchmark leaves the block through its ``finally``. Run alone for a look (``ps``), stopped by
Ctrl-C:

    python benchmarks/hog.py [--cpu] [--memory] [--mib 256] [--spinners-per-cpu N]
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


def cpu_ranges(where: list[int]) -> str:
    """CPU numbers the way ``taskset -c`` writes them: ``0-3,6``."""
    parts: list[str] = []
    for n in sorted(set(where)):
        if parts and int(parts[-1].rsplit("-", 1)[-1]) == n - 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{n}"
        else:
            parts.append(str(n))
    return ",".join(parts)


def describe_spinners(spinners: list[Hog]) -> str:
    """One spinner as before ("CPU spinner on CPU 0"); several as "2 CPU spinners on each of CPUs
    0-1" (the same number on every CPU) or "CPU spinners on CPUs 0 (×2), 1 (×1)"."""
    if len(spinners) == 1:
        return spinners[0].describe()
    per_cpu: dict[int, int] = {}
    for h in spinners:
        per_cpu[h.cpu] = per_cpu.get(h.cpu, 0) + 1
    counts = set(per_cpu.values())
    if len(counts) == 1:
        n = counts.pop()
        if len(per_cpu) == 1:
            return f"{n} CPU spinners on CPU {next(iter(per_cpu))}"
        return f"{n} CPU spinner{'s' if n > 1 else ''} on each of CPUs {cpu_ranges(list(per_cpu))}"
    return "CPU spinners on CPUs " + ", ".join(f"{c} (×{n})" for c, n in sorted(per_cpu.items()))


@dataclass
class Load:
    hogs: list[Hog] = field(default_factory=list)

    def describe(self) -> str:
        spinners = [h for h in self.hogs if h.kind == "cpu"]
        parts = [describe_spinners(spinners)] if spinners else []
        parts += [h.describe() for h in self.hogs if h.kind == "memory"]
        return ", ".join(parts) or "no hogs"

    @property
    def kinds(self) -> str:
        """``cpu``, ``memory``, ``cpu+memory`` or ``none`` (however many spinners run)."""
        return "+".join(sorted({h.kind for h in self.hogs})) or "none"

    @property
    def spinners(self) -> int:
        return sum(h.kind == "cpu" for h in self.hogs)

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


def spread(spinners_per_cpu: int, memory: bool) -> list[tuple[str, int]]:
    """``spinners_per_cpu`` spinners on every CPU of the affinity mask, and the memory hog on the
    last one: each hog's (kind, CPU), the memory hog first."""
    mask = cpus()
    where = [("memory", mask[-1])] if memory else []
    return where + [("cpu", c) for c in mask for _ in range(spinners_per_cpu)]


def _spawn(kind: str, cpu: int, mib: int) -> tuple[Hog, int]:
    """Start one hog; its readiness pipe's read end comes back with it (``_ready`` closes it)."""
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
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return Hog(kind, cpu, process, mib if kind == "memory" else 0), read_fd


def _ready(hog: Hog, read_fd: int, deadline: float) -> None:
    """Wait until ``hog`` says it runs; a RuntimeError (the hog killed) when it does not."""
    try:
        ready, _, _ = select.select([read_fd], [], [], max(0.0, deadline - time.monotonic()))
        signalled = bool(ready) and os.read(read_fd, 1) == b"1"
    finally:
        os.close(read_fd)
    process = hog.process
    if not signalled:
        if process.poll() is None:
            process.kill()
        err = process.communicate()[1].decode(errors="replace").strip()
        raise RuntimeError(f"{hog.describe()} did not start: {err[-400:] or 'timed out'}")


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
def hogs(
    cpu: bool = False, memory: bool = False, mib: int = 256, spinners_per_cpu: int | None = None
) -> Iterator[Load]:
    """Run the chosen hogs for the duration of the block; they are killed when it is left.

    ``cpu`` alone runs one spinner (``placement``); with ``spinners_per_cpu=N`` it runs N on
    every CPU of the affinity mask (``spread``). Raises ValueError for ``spinners_per_cpu`` below
    1 or without ``cpu``, RuntimeError when a hog fails to start, or (on a normal exit) when one
    stopped early.
    """
    if spinners_per_cpu is not None and (spinners_per_cpu < 1 or not cpu):
        raise ValueError("spinners_per_cpu takes cpu=True and a number of spinners of 1 or more")
    if spinners_per_cpu is None:  # memory first: its CPU is the last
        chosen = sorted(placement(cpu, memory).items(), reverse=True)
    else:
        chosen = spread(spinners_per_cpu, memory)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    load = Load()
    pending: list[tuple[Hog, int]] = []
    try:
        for kind, where in chosen:  # all started before any is waited for: a quick start
            pending.append(_spawn(kind, where, mib))
            load.hogs.append(pending[-1][0])
        deadline = time.monotonic() + READY_TIMEOUT_S
        while pending:
            _ready(*pending.pop(0), deadline)
        yield load
        died = load.died()
        if died:
            raise RuntimeError(f"hog stopped during the run: {'; '.join(died)}")
    finally:
        for _, read_fd in pending:  # a start that failed: the pipes not waited on yet
            os.close(read_fd)
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
    parser.add_argument("--spinners-per-cpu", type=int, metavar="N",
                        help="N spinners on every CPU of the mask (implies --cpu)")  # fmt: skip
    parser.add_argument("--child", choices=("cpu", "memory"), help=argparse.SUPPRESS)
    parser.add_argument("--pin", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.pin, args.mib, args.ready_fd, args.parent)
        return
    if args.spinners_per_cpu is not None:
        args.cpu = True
    if not (args.cpu or args.memory):
        args.cpu = args.memory = True
    with hogs(cpu=args.cpu, memory=args.memory, mib=args.mib,
              spinners_per_cpu=args.spinners_per_cpu) as load:  # fmt: skip
        print(f"{load.describe()}; Ctrl-C stops", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(1)


if __name__ == "__main__":
    main()
