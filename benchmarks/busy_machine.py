"""Verdicts on a busy machine: the suite's honest baselines, timed while another process keeps one
core busy, must come out PASSED every time (never SUSPICIOUS or TIMEOUT); their noise and the load
are reported.

It makes sure this machine's ceilings are measured first (on a quiet machine: run it when nothing
else runs), starts one busy process (a spinning Python loop), runs ``accelopt bench run --kernel
baseline`` RUNS times in a row, stops the busy process, and prints per problem and run the status,
% of peak, noise (IQR/median), the median's 95 % interval and the share of the CPUs other processes
took while the kernel was timed. Exit status 1 when any honest baseline was not PASSED. Usage:

    python benchmarks/busy_machine.py [--runs 3] [--workload cpu] [--problem NAME]...
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

SPIN = "while True: pass"


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
    args = parser.parse_args()
    if accelopt("hardware").stdout.count("not measured yet"):
        print("measuring this machine's ceilings first (quiet)...", flush=True)
        accelopt("hardware", "--measure")
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    runs: list[list[dict[str, object]]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(args.runs):
                print(f"run {run + 1} of {args.runs} with one core busy...", flush=True)
                runs.append(bench_run(args.workload, args.problem, Path(tmp) / f"{run}.json"))
    finally:
        spinner.kill()
        spinner.wait()
    return report(runs)


def report(runs: list[list[dict[str, object]]]) -> int:
    table = Table(title=f"baselines with one core busy ({os.cpu_count()} CPUs), {len(runs)} runs")
    table.add_column("problem")
    for i in range(len(runs)):
        for col in ("status", "% peak", "noise", "±95%", "others"):
            table.add_column(f"{col} {i + 1}", justify="right")
    bad = 0
    for row in zip(*runs, strict=True):
        cells = [str(row[0]["problem"])]
        for e in row:
            bad += e["status"] != "PASSED"
            cells += [str(e["status"]), pct(e.get("pct_of_peak")), pct(e.get("noise")),
                      pct(ci_of(e)), pct(e.get("load_others"))]  # fmt: skip
        table.add_row(*cells)
    Console(width=220).print(table)
    total = sum(len(r) for r in runs)
    print(f"{total - bad} of {total} honest baseline evaluations PASSED")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
