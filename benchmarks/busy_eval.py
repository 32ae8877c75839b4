"""What `accelopt eval` says on a busy machine: a figure whose interval covers the latency
measured quietly just before, or one that says it is disturbed; never a wrong figure stated as
sure.

It evaluates one shipped kernel quietly (the reference latency), then RUNS times beside two CPU
spinners on every CPU and a memory-bandwidth hog (``benchmarks/hog.py``, ``busy``), and prints per
run the latency, its 95 % interval, whether that interval covers the quiet latency, whether the
figure says it is disturbed, the clean and disturbed batches and the wall time; the last line
counts the runs that were honest (covered, or disturbed). Exit status 1 when one was not.
Usage:

    python benchmarks/busy_eval.py [--problem matmul] [--kernel expert] [--workload cpu]
        [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hog import hogs


def evaluate(problem: str, kernel: Path, workload: str, out: Path) -> tuple[dict, float]:
    """One ``accelopt eval`` as a user runs it: its JSON and its wall time."""
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "accelopt", "eval", problem, str(kernel), "--workload", workload,
         "--json", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"accelopt eval failed: {done.stderr.strip()[-500:]}")
    data = json.loads(out.read_text())
    return (data[0] if isinstance(data, list) else data), time.perf_counter() - began


def ms(value: object) -> str:
    return "—" if value is None else f"{float(value) * 1e3:.3f}"  # type: ignore[arg-type]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="matmul")
    parser.add_argument("--kernel", default="expert", help="baseline or expert")
    parser.add_argument("--workload", default="cpu")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    from accelopt.problems import load_problem

    kernel = load_problem(args.problem).kernel_path(args.kernel)
    with tempfile.TemporaryDirectory() as tmp:
        quiet, _ = evaluate(args.problem, kernel, args.workload, Path(tmp) / "quiet.json")
        reference = quiet["latency_s"]
        title = (f"{args.problem} {args.kernel} on {args.workload}: quiet {ms(reference)} ms, "
                 "then beside two spinners per CPU and a memory hog")  # fmt: skip
        table = Table(title=title)
        for col in ("run", "ms", "95 % interval", "covers quiet", "disturbed", "clean", "left out",
                    "wall s"):  # fmt: skip
            table.add_column(col, justify="right")
        honest = 0
        with hogs(cpu=True, memory=True, spinners_per_cpu=2) as load:
            print(f"hogs running: {load.describe()}", flush=True)
            for run in range(args.runs):
                e, wall = evaluate(args.problem, kernel, args.workload, Path(tmp) / f"{run}.json")
                low, high = e.get("ci_low_s"), e.get("ci_high_s")
                covers = low is not None and high is not None and low <= reference <= high
                honest += bool(covers or e.get("disturbed"))
                table.add_row(str(run + 1), ms(e.get("latency_s")), f"{ms(low)}-{ms(high)}",
                              "yes" if covers else "NO", "yes" if e.get("disturbed") else "no",
                              str(e.get("clean_batches")), str(e.get("disturbed_batches")),
                              f"{wall:.1f}")  # fmt: skip
    Console(width=150).print(table)
    print(f"covered the quiet latency or said it was disturbed in {honest} of {args.runs} runs")
    return 0 if honest == args.runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
