"""Verdicts on a busy machine: the suite's honest baselines, timed while other processes load the
machine, must come out PASSED every time (never SUSPICIOUS or TIMEOUT); their noise and the load
are reported.

It makes sure this machine's ceilings are measured first (on a quiet machine: run it when nothing
else runs), starts the hogs of ``--hog`` (``benchmarks/hog.py``): ``cpu``, a spinning Python loop;
``memory``, streaming copies between two 256 MiB arrays on one core; ``both`` (the default), the
two, each pinned to its own CPU where there are two or more (the memory hog on the last CPU of the
affinity mask, the spinner on the one before). It then runs ``accelopt bench run --kernel
baseline`` RUNS times in a row, stops the hogs, and prints per problem and run the status, % of
peak with the ceiling it used (``calibrated``: against the control micro-benchmark timed with the
kernel, so the load cancels; ``cached``: against this machine's stored ceiling), the % against
the cached ceiling, noise (IQR/median), the median's 95 % interval and the share of the CPUs other
processes took while the kernel was timed. The table's title says which hogs ran, and where.
Exit status 1 when any honest baseline was not PASSED. Usage:

    python benchmarks/busy_machine.py [--hog both|cpu|memory] [--runs 3] [--workload cpu]
        [--problem NAME]...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hog import hogs

HOGS = {"cpu": (True, False), "memory": (False, True), "both": (True, True)}


def accelopt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "accelopt", *args], capture_output=True, text=True, check=False
    )


def bench_run(workload: str, problems: list[str], out: Path) -> list[dict[str, object]]:
    selected = [arg for name in problems for arg in ("--problem", name)]
    done = accelopt("bench", "run", "--kernel", "baseline", "--workload", workload, *selected,
                    "--json", str(out))  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"accelopt bench run failed: {done.stderr.strip()[-500:]}")
    return json.loads(out.read_text())


def pct(value: object) -> str:
    return "—" if value is None else f"{float(value) * 100:.1f}%"  # type: ignore[arg-type]


def ci_of(e: dict[str, object]) -> float | None:
    low, high, median = e.get("ci_low_s"), e.get("ci_high_s"), e.get("latency_s")
    if low is None or high is None or not median:
        return None
    return (float(high) - float(low)) / (2 * float(median))  # type: ignore[arg-type]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workload", default="cpu")
    parser.add_argument("--problem", action="append", default=[])
    parser.add_argument("--hog", choices=tuple(HOGS), default="both",
                        help="the load: the CPU spinner, the memory hog or both")  # fmt: skip
    args = parser.parse_args()
    if accelopt("hardware").stdout.count("not measured yet"):
        print("measuring this machine's ceilings first (quiet)...", flush=True)
        accelopt("hardware", "--measure")
    cpu, memory = HOGS[args.hog]
    runs: list[list[dict[str, object]]] = []
    with hogs(cpu=cpu, memory=memory) as load, tempfile.TemporaryDirectory() as tmp:
        print(f"hogs running: {load.describe()}", flush=True)
        for run in range(args.runs):
            print(f"run {run + 1} of {args.runs} under load ({load.kinds})...", flush=True)
            runs.append(bench_run(args.workload, args.problem, Path(tmp) / f"{run}.json"))
        ran = load.describe()
    return report(runs, ran)


def text(value: object) -> str:
    return "—" if value is None or value == "" else str(value)


def report(runs: list[list[dict[str, object]]], ran: str) -> int:
    table = Table(title=f"baselines under load: {ran} ({os.cpu_count()} CPUs), {len(runs)} runs")
    table.add_column("problem")
    table.add_column("run", justify="right")
    for col in ("status", "% peak", "ceiling", "cached %", "noise", "±95%", "others"):
        table.add_column(col, justify="right")
    bad = 0
    for row in zip(*runs, strict=True):
        for i, e in enumerate(row):
            bad += e["status"] != "PASSED"
            table.add_row(str(e["problem"]) if i == 0 else "", str(i + 1), str(e["status"]),
                          pct(e.get("pct_of_peak")), text(e.get("ceiling")),
                          pct(e.get("cached_pct")), pct(e.get("noise")), pct(ci_of(e)),
                          pct(e.get("load_others")), end_section=i == len(row) - 1)  # fmt: skip
    Console(width=160).print(table)
    total = sum(len(r) for r in runs)
    print(f"{total - bad} of {total} honest baseline evaluations PASSED")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
