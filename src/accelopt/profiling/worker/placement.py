"""Where a kernel's threads run while they are timed: the same CPUs for every kernel a worker
times, and the ones its control (``control.c``) runs on.

Unpinned, a one-thread kernel lands on whichever CPU the scheduler picks: on a 2-CPU VM with a
spinner on one CPU and a memory hog on the other, two identical kernels in one session measured
0.61 and 1.38 apart (their processes sat beside different neighbours for the whole session), and
said the copy was 39 % faster within a +- 9 % interval. So for the timing, under the exclusive
device lock (nothing else of ours runs), every thread of the kernel's process is bound to the
first ``threads`` CPUs this worker may use, the ones ``control.c`` gives its threads one each;
they are released when the timing ends, so checks on other workers get the whole machine again.

Each thread gets a CPU of its own (the main thread the first, pool threads the next, as
``OMP_PROC_BIND=close`` places them), and the worker's timing thread waits for each batch on
the main thread's CPU, where nothing runs while the kernel's main thread waits for its next call:
so no thread of the kernel waits for a CPU behind another of ours, and a wait is another
process's doing (``disturbance.py``). Where the user binds the OpenMP pool (``OMP_PROC_BIND``,
``OMP_PLACES``, ``GOMP_CPU_AFFINITY``), libgomp already placed each thread the same way for
every kernel, and that placement is kept.
The kernel cannot undo its binding: its own ``sched_setaffinity`` is answered without effect
(``kernel_host.c``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence

from accelopt import settings

BINDING = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")


def cpus_for(threads: int | None, allowed: Sequence[int] | None = None) -> list[int]:
    """The first ``threads`` of this process's allowed CPUs (all of them for None or more)."""
    cpus = sorted(os.sched_getaffinity(0) if allowed is None else allowed)
    return cpus if threads is None or threads >= len(cpus) else cpus[: max(threads, 1)]


def user_binds(env: Mapping[str, str]) -> bool:
    """Whether the user placed the OpenMP pool themselves."""
    return any(env.get(name) for name in BINDING)


def _tasks(pid: int) -> list[int]:
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def bind(pids: Sequence[int], cpus: Sequence[int], one_each: bool = False) -> str:
    """Bind every thread of the processes ``pids`` to ``cpus`` (``one_each``: the main thread to
    the first, the next thread made to the second, and so round); what was done, in words."""
    for pid in pids:
        tids = sorted(_tasks(pid), key=lambda tid: (tid != pid, tid))
        for k, tid in enumerate(tids):
            try:
                os.sched_setaffinity(tid, [cpus[k % len(cpus)]] if one_each else cpus)
            except ProcessLookupError:
                continue
            except OSError as exc:
                return f"unpinned: its threads could not be bound ({exc.strerror})"
    return "CPU " + ",".join(map(str, cpus))


@contextlib.contextmanager
def pinned(
    pids: Sequence[int], threads: int | None, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """The kernel processes' threads on ``cpus_for(threads)`` for the block, then on every CPU
    this worker may use again; yields where they ran ("CPU 0", or why they were left alone)."""
    if not pids:
        yield "in the worker's process"
        return
    if user_binds(settings.environment() if env is None else env):
        yield "as the user's OpenMP binding places them"
        return
    allowed = sorted(os.sched_getaffinity(0))
    cpus = cpus_for(threads, allowed)
    where = bind(pids, cpus, one_each=True)
    os.sched_setaffinity(0, cpus[:1])  # this thread: asleep on the main thread's CPU in a call
    try:
        yield where
    finally:
        os.sched_setaffinity(0, allowed)
        bind(pids, allowed)  # also after a bind that failed part way: no thread left bound
