"""How busy the machine is: /proc/loadavg and /proc/stat parsed from sample text, and the rule that
calls a machine busy."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt.hardware import load
from accelopt.hardware.load import (
    CpuTimes,
    Load,
    busy_reasons,
    load_threshold,
    machine_load,
    parse_loadavg,
    parse_stat,
    steal_fraction,
)

LOADAVG = "0.80 0.40 0.16 3/91 6317\n"
STAT = """cpu  18783 0 5854 54175 331 0 44 74 10 0
cpu0 9000 0 2900 27000 160 0 20 40 5 0
cpu1 9783 0 2954 27175 171 0 24 34 5 0
intr 123456 0 0
ctxt 987654
btime 1764538000
processes 6320
procs_running 4
procs_blocked 0
"""


def test_parse_loadavg():
    assert parse_loadavg(LOADAVG) == (0.80, 3)


@pytest.mark.parametrize("text", ["", "0.1 0.2", "0.1 0.2 0.3 4 5", "a b c 1/2 3"])
def test_parse_loadavg_rejects_other_text(text):
    with pytest.raises(ValueError):
        parse_loadavg(text)


def test_parse_stat_reads_the_all_cpu_line_and_running_tasks():
    times, running = parse_stat(STAT)
    # user nice system idle iowait irq softirq steal; guest (10) is inside user already
    total = 18783 + 5854 + 54175 + 331 + 44 + 74
    assert times == CpuTimes(total=total, steal=74, idle=54175 + 331)  # idle and I/O wait
    assert running == 4


def test_parse_stat_of_an_old_kernel_without_steal():
    times, running = parse_stat("cpu  100 0 50 850\n")
    assert times == CpuTimes(total=1000, steal=0, idle=850)
    assert running is None


def test_parse_stat_without_a_cpu_line_is_rejected():
    with pytest.raises(ValueError, match="no cpu line"):
        parse_stat("cpu0 1 2 3 4\nprocs_running 2\n")


def test_steal_fraction():
    assert steal_fraction(CpuTimes(1000, 10), CpuTimes(2000, 60)) == pytest.approx(0.05)
    assert steal_fraction(CpuTimes(1000, 10), CpuTimes(1000, 10)) == 0.0  # no time passed
    assert steal_fraction(CpuTimes(1000, 10), CpuTimes(1100, 10)) == 0.0


@pytest.mark.parametrize(("cpus", "threshold"), [(1, 0.5), (2, 1.0), (4, 2.0), (64, 32.0)])
def test_other_work_may_take_half_the_cpus(cpus, threshold):
    assert load_threshold(cpus) == threshold


def test_a_quiet_machine_has_no_reasons():
    assert busy_reasons(loadavg=0.3, running=1, cpus=2, steal=0.0) == ()
    assert busy_reasons(loadavg=None, running=None, cpus=2, steal=None) == ()  # unknown: quiet


def test_each_sign_of_a_busy_machine_is_a_reason():
    assert busy_reasons(1.5, 1, 2, 0.0) == ("1-minute load average 1.50 on 2 CPUs",)
    assert busy_reasons(0.2, 3, 2, 0.0) == ("2 other runnable tasks on 2 CPUs",)  # reader aside
    assert busy_reasons(0.2, 1, 2, 0.1) == ("the hypervisor stole 10% of the CPU time",)
    assert len(busy_reasons(3.0, 5, 2, 0.2)) == 3


def test_load_busy_and_describe():
    quiet = Load(loadavg=0.25, running=1, cpus=2, steal=0.0)
    assert not quiet.busy
    assert quiet.describe() == "quiet: load average 0.25, 1 runnable, steal 0.0% on 2 CPUs"
    busy = Load(loadavg=2.5, running=1, cpus=2, steal=0.0)
    assert busy.busy
    assert busy.describe() == "busy: 1-minute load average 2.50 on 2 CPUs"
    assert Load(None, None, 4, None).describe() == "quiet: load unknown on 4 CPUs"


def test_machine_load_reads_proc(monkeypatch, tmp_path: Path):
    (tmp_path / "loadavg").write_text(LOADAVG)
    (tmp_path / "stat").write_text(STAT)
    monkeypatch.setattr(load, "PROC_LOADAVG", tmp_path / "loadavg")
    monkeypatch.setattr(load, "PROC_STAT", tmp_path / "stat")
    monkeypatch.setattr(load.os, "cpu_count", lambda: 8)
    since = CpuTimes(total=78000, steal=0)
    now = machine_load(since=since)
    assert (now.loadavg, now.running, now.cpus) == (0.80, 4, 8)
    assert now.steal == pytest.approx(74 / (79261 - 78000))
    assert now.times == parse_stat(STAT)[0]


def test_machine_load_where_proc_is_unreadable(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(load, "PROC_LOADAVG", tmp_path / "missing")
    monkeypatch.setattr(load, "PROC_STAT", tmp_path / "missing")
    now = machine_load(sample_s=0)
    assert (now.loadavg, now.running, now.steal, now.times) == (None, None, None, None)
    assert not now.busy


def test_machine_load_here():
    now = machine_load(sample_s=0)
    assert now.cpus >= 1
    if Path("/proc/loadavg").is_file():
        assert now.loadavg is not None and now.loadavg >= 0
        assert now.running is not None and now.running >= 1  # this process
        assert now.steal is not None and 0 <= now.steal <= 1
