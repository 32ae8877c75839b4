"""Repeatable figures: the same kernel evaluated in separate processes must give medians within a
few percent. For each problem, its shipped kernel (baseline, or --kernel expert) is evaluated
RUNS times by separate ``accelopt eval`` processes; the table gives each run's median, the
median's 95 % interval from within the run, the noise (IQR/median) and the spread between runs
((max - min) / min of the medians). Run on a quiet machine. Usage:

    python benchmarks/repeatability.py [--runs 3] [--kernel baseline] [--problem NAME]...
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

DEFAULT_PROBLEMS = ("matmul", "silu", "rope_single_freq_apply", "adamw")


def evaluate(problem: str, kernel: Path, workload: str, out: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "accelopt", "eval", problem, str(kernel), "--workload", workload,
         "--json", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"accelopt eval {problem} failed: {done.stderr.strip()[-400:]}")
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kernel", default="baseline", choices=("baseline", "expert"))
    parser.add_argument("--workload", default="cpu")
    parser.add_argument("--problem", action="append")
    args = parser.parse_args()
    from accelopt.problems import load_problem

    table = Table(title=f"{args.kernel} medians of {args.runs} separate evaluations")
    table.add_column("problem")
    for i in range(args.runs):
        table.add_column(f"ms {i + 1}", justify="right")
        table.add_column(f"±95% {i + 1}", justify="right")
        table.add_column(f"noise {i + 1}", justify="right")
    table.add_column("spread", justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.problem or DEFAULT_PROBLEMS:
            kernel = load_problem(name).kernel_path(args.kernel)
            row, medians = [name], []
            for run in range(args.runs):
                e = evaluate(name, kernel, args.workload, Path(tmp) / f"{name}-{run}.json")
                median = e["latency_s"]
                medians.append(median)
                ci = (e["ci_high_s"] - e["ci_low_s"]) / (2 * median)
                row += [f"{median * 1e3:.3f}", f"{ci * 100:.1f}%", f"{e['noise'] * 100:.1f}%"]
            row.append(f"{(max(medians) - min(medians)) / min(medians) * 100:.1f}%")
            table.add_row(*row)
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
