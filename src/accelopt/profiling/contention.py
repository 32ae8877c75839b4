"""How much of the machine others used while a kernel was timed: the CPU time of every other
process and of the hypervisor (steal), from /proc/stat and this process's own CPU time.

Read by the worker just before and just after its timed calls (outside the timed window). The
figure is reported with the evaluation, never used to reject it: load is reported, not punished.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
# /proc/stat's "cpu" line: user nice system idle iowait irq softirq steal (guest time is
# already counted in user and nice).
_BUSY = (0, 1, 2, 5, 6)
_IDLE = (3, 4)
_STEAL = 7


@dataclass(frozen=True)
class CpuSnapshot:
    """Cumulative CPU seconds of the whole machine and of this process at one instant."""

    busy_s: float  # all CPUs, every process, not counting steal
    idle_s: float
    steal_s: float
    own_s: float  # this process, all its threads


@dataclass(frozen=True)
class Contention:
    """What others took of the machine during an interval, as fractions of all its CPUs."""

    others: float  # CPU time of other processes / (wall time x CPUs)
    steal: float  # time the hypervisor gave the CPUs to other guests / all CPU time

    @property
    def busy(self) -> bool:
        """Enough to move a timing: another process used a tenth of a CPU, or steal did."""
        return self.others > 0.1 or self.steal > 0.05


def parse_cpu_line(text: str, ticks_per_s: float) -> tuple[float, float, float]:
    """(busy, idle, steal) seconds from /proc/stat's aggregate ``cpu`` line."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:9]] + [0] * (8 - len(fields[1:9]))
            busy = sum(values[i] for i in _BUSY)
            idle = sum(values[i] for i in _IDLE)
            return busy / ticks_per_s, idle / ticks_per_s, values[_STEAL] / ticks_per_s
    raise ValueError("no aggregate cpu line in /proc/stat")


def snapshot() -> CpuSnapshot | None:
    """The machine's and this process's CPU time now; None where /proc/stat is not readable."""
    try:
        busy, idle, steal = parse_cpu_line(PROC_STAT.read_text(), os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None
    own = os.times()
    return CpuSnapshot(busy, idle, steal, own.user + own.system)


def contention(before: CpuSnapshot, after: CpuSnapshot) -> Contention:
    """Others' share of the machine between two snapshots (a pure function)."""
    total = (after.busy_s - before.busy_s) + (after.idle_s - before.idle_s)
    steal = after.steal_s - before.steal_s
    if total + steal <= 0:
        return Contention(0.0, 0.0)
    others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    return Contention(max(0.0, others / total), max(0.0, steal / (total + steal)))
