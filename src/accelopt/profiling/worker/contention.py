"""How much of the machine others used while a kernel was timed: the CPU time of every other
process and of the hypervisor (steal), from /proc/stat (``hardware.load``), this process's own CPU
time and that of the kernel's process where it has one (the cpu backend's kernel host).

Read by the worker just before and just after its timed calls (outside the timed window). The
figure is reported with the evaluation, never used to reject it: load is reported, not punished.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from accelopt.hardware.load import CpuTimes, read_cpu_times


@dataclass(frozen=True)
class CpuSnapshot:
    """The machine's CPU times and this process's own (all its threads), in clock ticks."""

    machine: CpuTimes
    own: float


@dataclass(frozen=True)
class Contention:
    """What others took of the machine during an interval, as fractions of all its CPUs."""

    others: float  # CPU time of other processes / CPU time the machine had
    steal: float  # time the hypervisor gave the CPUs to other guests / all CPU time


def process_ticks(pid: int) -> float:
    """A live process's CPU time (user + system, all its threads) in clock ticks; 0 if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return float(int(fields[11]) + int(fields[12]))  # utime, stime (fields 14, 15)


def snapshot(kernel_pids: tuple[int, ...] = ()) -> CpuSnapshot | None:
    """The machine's CPU time now, and this process's with the kernel processes' (``kernel_pids``:
    ours, not others'); None where /proc/stat is not readable."""
    machine = read_cpu_times()
    if machine is None:
        return None
    own = os.times()
    ticks = (own.user + own.system) * os.sysconf("SC_CLK_TCK")
    return CpuSnapshot(machine, ticks + sum(process_ticks(pid) for pid in kernel_pids))


def contention(before: CpuSnapshot, after: CpuSnapshot) -> Contention:
    """Others' share of the machine between two snapshots (a pure function)."""
    total = after.machine.total - before.machine.total
    steal = after.machine.steal - before.machine.steal
    if total <= 0:
        return Contention(0.0, 0.0)
    had = total - steal  # what the guest's CPUs ran: busy or idle
    busy = had - (after.machine.idle - before.machine.idle)
    others = busy - (after.own - before.own)
    return Contention(max(0.0, others / had) if had > 0 else 0.0, max(0.0, steal / total))
