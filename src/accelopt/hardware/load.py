"""How busy this machine is: the load average, the runnable tasks and the CPU time the hypervisor
steals, read from /proc (Linux). Ceilings measured on a busy machine come out low, and timings are
noisy: the micro-benchmarks and anyone reporting a timing can say what the machine was doing.

The parsing functions are pure (tested on sample text); ``machine_load`` reads /proc. Where /proc
is unreadable (not Linux), the figures are unknown (``None``) and the machine is not called busy.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PROC_LOADAVG = Path("/proc/loadavg")
PROC_STAT = Path("/proc/stat")

# The machine is busy when other work occupies more than its CPUs minus this margin (a fraction of
# them): a measurement on every core shares them with that work.
LOAD_MARGIN_FRACTION = 0.5
# A hypervisor that takes more than this share of the CPU time is running other guests on ours.
STEAL_LIMIT = 0.02
STEAL_SAMPLE_S = 0.1


@dataclass(frozen=True)
class CpuTimes:
    """The all-CPU line of /proc/stat: total, stolen and idle (with I/O wait) time, in clock ticks
    since boot."""

    total: int
    steal: int
    idle: int = 0


@dataclass(frozen=True)
class Load:
    """What else the machine is doing. ``running`` counts runnable tasks, the reader included;
    ``steal`` is the share of CPU time stolen over the sampled interval; None when unknown.
    ``cpus`` counts the machine's online CPUs: the load average and steal are machine-wide."""

    loadavg: float | None
    running: int | None
    cpus: int
    steal: float | None
    times: CpuTimes | None = None  # the /proc/stat reading at the end of the sample

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the machine is busy; empty when it is quiet."""
        return busy_reasons(self.loadavg, self.running, self.cpus, self.steal)

    @property
    def busy(self) -> bool:
        return bool(self.reasons)

    def describe(self) -> str:
        """One line: busy and why, or quiet and the figures."""
        return verdict(self.reasons, "busy", f"quiet: {describe_figures(self)}")


def parse_loadavg(text: str) -> tuple[float, int]:
    """The 1-minute load average and the runnable tasks of /proc/loadavg's text."""
    fields = text.split()
    if len(fields) < 4 or "/" not in fields[3]:
        raise ValueError(f"not /proc/loadavg: {text[:80]!r}")
    return float(fields[0]), int(fields[3].split("/")[0])


def parse_stat(text: str) -> tuple[CpuTimes, int | None]:
    """The all-CPU times and ``procs_running`` of /proc/stat's text. Steal is the 8th figure of
    the ``cpu`` line (user nice system idle iowait irq softirq steal guest guest_nice); guest time
    is already counted in user and nice, so it is left out of the total."""
    times: CpuTimes | None = None
    running: int | None = None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(f) for f in fields[1:9]]
            steal = ticks[7] if len(ticks) > 7 else 0
            times = CpuTimes(total=sum(ticks), steal=steal, idle=sum(ticks[3:5]))
        elif fields[:1] == ["procs_running"] and len(fields) > 1:
            running = int(fields[1])
    if times is None:
        raise ValueError("not /proc/stat: no cpu line")
    return times, running


def steal_fraction(before: CpuTimes, after: CpuTimes) -> float:
    """The share of CPU time stolen between two readings (0 when no time passed)."""
    elapsed = after.total - before.total
    if elapsed <= 0:
        return 0.0
    return max(0.0, (after.steal - before.steal) / elapsed)


def load_threshold(cpus: int) -> float:
    """The load (other runnable tasks) above which a measurement on every core is disturbed."""
    return cpus - LOAD_MARGIN_FRACTION * cpus


def busy_reasons(
    loadavg: float | None, running: int | None, cpus: int, steal: float | None
) -> tuple[str, ...]:
    """Why a machine with these figures is busy (empty: quiet). ``running`` includes the reader."""
    threshold = load_threshold(cpus)
    reasons = []
    if loadavg is not None and loadavg > threshold:
        reasons.append(f"1-minute load average {loadavg:.2f} on {cpus} CPUs")
    if running is not None and running - 1 > threshold:
        reasons.append(f"{running - 1} other runnable tasks on {cpus} CPUs")
    if steal is not None and steal > STEAL_LIMIT:
        reasons.append(f"the hypervisor stole {steal:.0%} of the CPU time")
    return tuple(reasons)


def verdict(reasons: tuple[str, ...], doubt: str, quiet: str) -> str:
    """One line on what was seen: ``doubt`` and the reasons for it, or ``quiet`` when none."""
    return f"{doubt}: " + "; ".join(reasons) if reasons else quiet


def describe_figures(load: Load) -> str:
    """E.g. ``load average 0.20, 1 runnable, steal 0.0% on 2 CPUs``."""
    parts = []
    if load.loadavg is not None:
        parts.append(f"load average {load.loadavg:.2f}")
    if load.running is not None:
        parts.append(f"{load.running} runnable")
    if load.steal is not None:
        parts.append(f"steal {load.steal:.1%}")
    return f"{', '.join(parts) or 'load unknown'} on {load.cpus} CPUs"


def read_loadavg(path: Path | None = None) -> tuple[float | None, int | None]:
    try:
        return parse_loadavg((path or PROC_LOADAVG).read_text())
    except (OSError, ValueError):
        return None, None


def read_stat(path: Path | None = None) -> tuple[CpuTimes | None, int | None]:
    try:
        return parse_stat((path or PROC_STAT).read_text())
    except (OSError, ValueError):
        return None, None


def read_cpu_times() -> CpuTimes | None:
    """The all-CPU times now, or None where /proc/stat is unreadable."""
    return read_stat()[0]


def machine_load(since: CpuTimes | None = None, sample_s: float = STEAL_SAMPLE_S) -> Load:
    """The load now. Steal is measured from ``since`` (a ``read_cpu_times()`` taken earlier) to
    now, or over ``sample_s`` seconds of sleep when ``since`` is None."""
    if since is None:
        since = read_cpu_times()
        if since is not None and sample_s > 0:
            time.sleep(sample_s)
    loadavg, runnable = read_loadavg()
    times, running = read_stat()
    steal = steal_fraction(since, times) if since is not None and times is not None else None
    running = running if running is not None else runnable
    return Load(loadavg, running, os.cpu_count() or 1, steal, times)
