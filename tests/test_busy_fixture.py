"""tests/support/busy.py: the busy machine tests time things on runs, is pinned, and leaves
nothing behind: not after the block, not after its time limit, not after its parent is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from busy import busy_machine

pytestmark = pytest.mark.alone  # it loads every CPU: no other test's timings beside it

TICKS = os.sysconf("SC_CLK_TCK")


def stat(pid: int) -> tuple[str, float] | None:
    """A process's state letter and CPU seconds (user + system), or None once it is reaped."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return fields[0], (int(fields[11]) + int(fields[12])) / TICKS


def ended(pid: int) -> bool:
    """Exited (a zombie not reaped yet) or gone."""
    now = stat(pid)
    return now is None or now[0] in "ZX"


def wait_until(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_runs_pinned_and_is_gone_after_the_block() -> None:
    mask = sorted(os.sched_getaffinity(0))
    with busy_machine(spinners_per_cpu=2, memory=True, limit_s=60) as load:
        assert load.startswith("2 CPU spinners on ")
        assert load.endswith(f"memory hog (2 × 64 MiB copies) on CPU {mask[-1]}")
        assert sorted(load.kinds) == ["cpu"] * 2 * len(mask) + ["memory"]
        spinners = sorted(c for c, k in zip(load.cpus, load.kinds, strict=True) if k == "cpu")
        assert spinners == sorted(mask * 2)  # two on each CPU of the mask
        for pid, cpu, kind in zip(load.pids, load.cpus, load.kinds, strict=True):
            assert os.sched_getaffinity(pid) == {cpu}, kind
            if kind == "memory":
                assert cpu == mask[-1]
        before: dict[int, float] = {}
        for pid in load.pids:
            now = stat(pid)
            assert now is not None and now[0] not in "ZX", (pid, now)
            before[pid] = now[1]
        time.sleep(0.6)

        def grew() -> bool:
            now = {pid: stat(pid) for pid in load.pids}
            return all(n is not None and n[1] > before[pid] for pid, n in now.items())

        assert wait_until(grew, 5.0), {pid: (before[pid], stat(pid)) for pid in load.pids}
    assert all(stat(pid) is None for pid in load.pids)  # killed and reaped


def test_they_stop_by_themselves_after_the_limit() -> None:
    with busy_machine(spinners_per_cpu=1, memory=True, limit_s=0.5, mib=8) as load:
        started = time.monotonic()
        assert wait_until(lambda: all(ended(pid) for pid in load.pids), 15.0)
        assert time.monotonic() - started >= 0.2  # they ran first: the limit, not a crash
    assert all(stat(pid) is None for pid in load.pids)


def test_they_die_with_a_killed_parent(tmp_path: Path) -> None:
    support = Path(__file__).parent / "support"
    script = (
        f"import sys, time; sys.path.insert(0, {str(support)!r})\n"
        "from busy import busy_machine\n"
        "with busy_machine(spinners_per_cpu=1, memory=True, limit_s=60, mib=8) as load:\n"
        "    print(*load.pids, flush=True)\n"
        "    time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert pids and all(not ended(pid) for pid in pids)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    # Orphans are reaped by init (or a subreaper), so they are gone, not zombies, soon after.
    assert wait_until(lambda: all(ended(pid) for pid in pids), 10.0)
