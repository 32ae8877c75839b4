"""Which timed batches another process disturbed: the kernel's threads' *run delay*.

A thread's run delay (``/proc/PID/task/TID/schedstat``, second field, in nanoseconds; the
kernel's ``sched_info``) is the time it was ready to run but waited for a CPU. While a batch of
calls is timed, the kernel's threads have nothing to wait for but each other and other
processes: on a quiet machine their run delay over a batch is the wake-ups' (0-30 us a batch
here, a 2-thread OpenMP kernel); when
another process holds one of their CPUs, a thread waits for a whole scheduler slice
(milliseconds), and a parallel kernel's other threads wait for it at their barrier. Measured on
this project's 2-core AMD EPYC VM (2026-12-07, a 2-thread OpenMP loop timed 2000 times through
a pipe, as the kernel host is): quiet, 98 % of batches under the threshold below, their median 2.18
ms; beside four CPU spinners, 5 % under it, their median 2.17 ms, the others' 11.97 ms. So a
batch whose threads waited more than ``max(FLOOR_NS, SHARE x its wall time)`` is *disturbed*
and left out of the latency (``TimedLoop``); the clean ones measure the kernel, not the load.

A wait is added to a thread's run delay when it ends, so what the harness's own threads do
must not make the kernel's wait: while it is timed, each of the kernel's threads is bound to a
CPU of its own and the worker's timing thread to the main thread's (asleep between batches:
``placement.pinned``), so a spinning OpenMP pool thread never queues the main thread's wake-up
behind it. A kernel with more threads than CPUs makes its own threads wait: the signal is
unavailable for it (every batch kept, ``available``), which is also what a kernel that made
threads to fake a disturbance gets.

The reader keeps one open file per thread and re-reads it with ``pread`` (3-12 us for three
threads; the task list is re-read once per slice, not per batch, as the OpenMP pool is made
during the warm-up). Where ``schedstat`` is missing (a kernel without ``CONFIG_SCHED_INFO``) the
signal is unavailable: every batch is kept and the evaluation says so (``available``).

A kernel can make its own batches look disturbed (more threads than its CPUs): that only leaves
them out, and an evaluation with too few clean batches is ``disturbed``, never ranked.
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

FLOOR_NS = 100_000  # run delay a batch may have and still be clean: wake-ups, not a time slice
SHARE = 0.02  # ... or this share of the batch's wall time, whichever is larger


def disturbed(delay_ns: int, wall_s: float) -> bool:
    """Whether a batch whose threads waited ``delay_ns`` for a CPU in ``wall_s`` was disturbed."""
    return delay_ns > max(FLOOR_NS, SHARE * wall_s * 1e9)


SETTLE_TRIES = 8  # yields, at most, for the kernel's main thread to go back to waiting


def _runnable(stat_fd: int) -> bool:
    try:
        return os.pread(stat_fd, 512, 0).rpartition(b")")[2].split()[:1] == [b"R"]
    except OSError:
        return False


@dataclass(frozen=True)
class Reading:
    """Nanoseconds so far: the kernel's threads' run delay, the timing thread's own, and the
    kernel's main threads' CPU time."""

    kernel_delay: int
    own_delay: int
    main_cpu: int
    threads: tuple[int, ...] = ()  # each kernel thread's run delay, in the files' order


def _fields(fd: int) -> tuple[int, int]:
    """(CPU time, run delay) from an open schedstat file; (0, 0) if the thread is gone."""
    try:
        words = os.pread(fd, 96, 0).split()
        return int(words[0]), int(words[1])
    except (OSError, ValueError, IndexError):
        return 0, 0


class RunDelay:
    """How long the kernel's threads (the processes ``pids``) and the timing thread waited for
    a CPU another process held, from their run delays; ``available`` where it can tell:
    schedstat exists, the kernel has a process of its own, and no more threads than its
    ``cpus``. The timing thread shares the main thread's CPU and waits behind it through a
    batch (the main thread, woken by the batch's command, may preempt it before it sleeps), so
    its own wait counts only beyond the main thread's CPU time meanwhile (``waited``)."""

    def __init__(self, pids: Sequence[int], cpus: int) -> None:
        self.pids, self.cpus = tuple(pids), max(1, cpus)
        self._files: dict[str, int] = {}
        self._mains: list[int] = []  # each kernel process's main thread's stat ...
        self._main_sched: list[int] = []  # ... and schedstat
        self._own = -1
        self.available = bool(self.pids) and os.path.exists("/proc/thread-self/schedstat")
        self._owned: list[int] = []  # the timing thread's schedstat
        weakref.finalize(self, _close, self._files, self._mains, self._main_sched, self._owned)
        if not self.available:
            return
        self._own = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        self._owned.append(self._own)
        for pid in self.pids:
            with contextlib.suppress(OSError):
                self._mains.append(os.open(f"/proc/{pid}/task/{pid}/stat", os.O_RDONLY))
                self._main_sched.append(os.open(f"/proc/{pid}/task/{pid}/schedstat", os.O_RDONLY))
        self.rescan()

    def rescan(self) -> None:
        """Open the files of threads made since the last scan; close those of threads gone."""
        if not self.available:
            return
        paths = set()
        for root in [f"/proc/{pid}/task" for pid in self.pids]:
            with contextlib.suppress(OSError):
                paths.update(f"{root}/{tid}/schedstat" for tid in os.listdir(root))
        if len(paths) > self.cpus:  # its own threads wait for each other
            self.available = False
        for path in set(self._files) - paths:
            os.close(self._files.pop(path))
        for path in paths - set(self._files):
            with contextlib.suppress(OSError):
                self._files[path] = os.open(path, os.O_RDONLY)

    def read(self) -> Reading:
        """The figures now (threads gone since the last scan count 0), once the kernel's main
        threads went back to waiting for their next call (``settle``)."""
        self.settle()
        threads = tuple(_fields(fd)[1] for fd in self._files.values())
        return Reading(
            sum(threads),
            _fields(self._own)[1],
            sum(_fields(fd)[0] for fd in self._main_sched),
            threads,
        )

    @staticmethod
    def longest(before: Reading, after: Reading) -> int:
        """The longest any one kernel thread waited between two readings: a batch less it
        estimates what the batch would take undisturbed (exactly where the threads waited at
        the same moments; more where they waited in turn, each stalling the others)."""
        pairs = zip(before.threads, after.threads, strict=False)
        return max((a - b for b, a in pairs), default=0)

    @staticmethod
    def waited(before: Reading, after: Reading) -> int:
        """Nanoseconds the batch between two readings waited for other processes: the kernel's
        threads' run delay, and the timing thread's beyond the main threads' CPU time."""
        own = (after.own_delay - before.own_delay) - (after.main_cpu - before.main_cpu)
        return after.kernel_delay - before.kernel_delay + max(0, own)

    def settle(self) -> None:
        """Give the CPU to the kernel's main threads until they wait for their next call: a
        main thread that this thread preempted right after it answered a batch (the two share a
        CPU, ``placement.pinned``) would otherwise wait through the harness's work between
        batches, and that wait would be counted in the next batch."""
        for _ in range(SETTLE_TRIES):
            if not any(_runnable(fd) for fd in self._mains):
                return
            os.sched_yield()


def _close(files: dict[str, int], *lists: list[int]) -> None:
    """Close a ``RunDelay``'s files (when it is collected)."""
    for fd in [*files.values(), *(fd for fds in lists for fd in fds)]:
        with contextlib.suppress(OSError):
            os.close(fd)
    files.clear()


def _task_files(pids: Sequence[int], name: str) -> Iterator[str]:
    """The text of ``/proc/PID/task/TID/NAME`` for every thread of the processes ``pids`` (those
    gone meanwhile are skipped)."""
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/{name}") as f:
                    yield f.read()
            except OSError:
                continue


def task_ns(pids: Sequence[int]) -> int:
    """CPU time, in nanoseconds, of every thread of the processes ``pids`` (gone ones: 0)."""
    total = 0
    for text in _task_files(pids, "schedstat"):
        with contextlib.suppress(ValueError, IndexError):
            total += int(text.split()[0])
    return total


def all_stopped(pids: Sequence[int], wait_s: float = 0.05) -> bool:
    """Wait, ``wait_s`` at most, until every thread of the processes ``pids`` is stopped (state
    T, after ``Device.pause``): a thread's CPU time is brought up to date when it stops, so only
    then is it final."""
    deadline = time.perf_counter() + wait_s
    while True:
        states = [text.rpartition(")")[2].split()[:1] for text in _task_files(pids, "stat")]
        if all(state in (["T"], ["t"]) for state in states):
            return True
        if time.perf_counter() >= deadline:
            return False
        time.sleep(0.0002)


def any_running(pids: Sequence[int]) -> bool:
    """Whether a thread of the processes ``pids`` is running or waiting for a CPU (state R)."""
    states = (text.rpartition(")")[2].split(maxsplit=1)[:1] for text in _task_files(pids, "stat"))
    return any(state == ["R"] for state in states)


# After a call an OpenMP pool spins before its threads sleep: 7-10 ms of CPU time here (libgomp,
# two threads; 18-34 ms of wall time, beside four spinners the longer), so a kernel's process may
# use SPIN_NS per thread, and never less than SPIN_FLOOR_NS, after a call; one that uses more
# before it falls idle keeps a thread busy between its calls, to slow whatever is timed beside it.
SPIN_NS = 20_000_000
SPIN_FLOOR_NS = 50_000_000
IDLE_WAIT_S = 0.5  # looking this long at most (a busy machine slows a spinning pool's fall) ...
IDLE_STEP_S = 0.001  # ... this often


def between_calls(pids: Sequence[int], threads: int) -> str:
    """Wait, after a call, until the kernel's processes ``pids`` fall idle (no thread running or
    runnable); the sentence that rejects them if they used more CPU time meanwhile than an
    OpenMP pool's spin, else ''. Still running after IDLE_WAIT_S within that allowance (a
    very busy machine, or a thread that wakes now and then): '' (the caller stops the process)."""
    if not pids:
        return ""
    allowance = max(SPIN_FLOOR_NS, SPIN_NS * threads)
    start, began = task_ns(pids), time.perf_counter()
    while any_running(pids):
        used = task_ns(pids) - start
        if used > allowance:
            return (
                f"the kernel's process kept running between its calls ({used / 1e6:.0f} ms of CPU "
                f"in {(time.perf_counter() - began) * 1e3:.0f} ms after a call, where an OpenMP "
                f"pool spins {allowance / 1e6:.0f} ms at most): a thread left busy slows whatever "
                "is timed beside it"
            )
        if time.perf_counter() - began >= IDLE_WAIT_S:
            return ""
        time.sleep(IDLE_STEP_S)
    return ""
