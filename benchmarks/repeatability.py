"""Repeatable figures: the same kernel evaluated in separate processes must give medians within a
few percent, each inside the others' stated 95 % intervals, and the calibrated % of peak must
hold even while a neighbour loads the machine.

For each problem, its shipped kernel (baseline, or --kernel expert; problems without one are
skipped with a note) is evaluated RUNS times by separate ``accelopt eval`` processes. Run
``--hog-run K`` (default 1; 0: none) runs with the memory hog of ``benchmarks/hog.py`` on
(streaming copies between two 256 MiB arrays on the last CPU; every run evaluates on the other
CPUs, as a neighbouring VM competes for memory, not for this VM's CPUs; ``--share-cpus``: on
all of them): its latency should move, its
calibrated % of peak (timed against the control micro-benchmark interleaved with the kernel)
should not. Per problem a table gives, per run, the status, the median latency with its stated
95 % interval (± relative to the median), the timing's own half-width (session) and the drift
between evaluations, the calibrated % of peak with its stated interval (± relative to the
figure), which ceiling the tables use for it (``calibrated`` or ``cached``: EvalConfig.headline),
the % against the cached ceiling and the noise (IQR/median); below them, per figure:

- spread: (max - min) / min of the runs' medians (the calibrated % over the runs that have one);
- coverage: over ordered pairs of runs (i, j), i != j, how many of run j's medians fall within
  run i's stated interval (e.g. ``6/6``).

A line per figure sums up over all problems at the end. Figures not measured print ``—``. Run on
an otherwise quiet machine. Usage:

    python benchmarks/repeatability.py [--runs 3] [--hog-run 1] [--kernel baseline|expert]
        [--workload cpu] [--problem NAME]... [--json PATH]

``--json PATH`` writes the raw per-run figures (each evaluation's JSON, less its isolation
report and log, with ``run`` and ``hog``) and each problem's spreads and coverages.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hog import hogs

DEFAULT_PROBLEMS = ("matmul", "silu", "rope_single_freq_apply", "adamw")
DROPPED = ("isolation", "log")  # bulky, and not figures

Eval = dict[str, Any]


def evaluate(
    problem: str, kernel: Path, workload: str, out: Path, cpus: set[int] | None = None
) -> Eval:
    """One ``accelopt eval`` process, on ``cpus`` (its affinity mask: its kernel's threads, its
    controls and this machine's ceilings are those of these CPUs) where given."""
    done = subprocess.run(
        [sys.executable, "-m", "accelopt", "eval", problem, str(kernel), "--workload", workload,
         "--json", str(out)],
        capture_output=True, text=True, check=False,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )  # fmt: skip
    try:
        return json.loads(out.read_text())
    except (OSError, ValueError):
        err = done.stderr.strip()[-400:]
        raise SystemExit(f"accelopt eval {problem} failed ({done.returncode}): {err}") from None


def num(e: Eval, key: str) -> float | None:
    value = e.get(key)
    return None if value is None else float(value)


def half_width(low: float | None, high: float | None, centre: float | None) -> float | None:
    """The interval's half-width relative to its centre figure."""
    if low is None or high is None or not centre:
        return None
    return (high - low) / (2 * centre)


def spread(values: Sequence[float | None]) -> float | None:
    """(max - min) / min over the measured values; None with fewer than two."""
    known = [v for v in values if v is not None and v > 0]
    return (max(known) - min(known)) / min(known) if len(known) >= 2 else None


Interval = tuple[float | None, float | None, float | None]  # median, low, high


def coverage(runs: Sequence[Interval]) -> tuple[int, int]:
    """Over ordered pairs (i, j), i != j, where both are known: how many of run j's medians fall
    within run i's stated interval, and of how many pairs."""
    hits = pairs = 0
    for i, (_, low, high) in enumerate(runs):
        if low is None or high is None:
            continue
        for j, (median, _, _) in enumerate(runs):
            if i != j and median is not None:
                pairs += 1
                hits += low <= median <= high
    return hits, pairs


def calibrated(e: Eval) -> bool:
    """Whether the run has a calibrated figure (used by the tables or, memory-bound, beside)."""
    return e.get("calibrated_pct") is not None


@dataclass
class Problem:
    name: str
    kernel: Path
    runs: list[Eval] = field(default_factory=list)
    hog_runs: list[bool] = field(default_factory=list)

    def latencies(self) -> list[Interval]:
        return [(num(e, "latency_s"), num(e, "ci_low_s"), num(e, "ci_high_s")) for e in self.runs]

    def calibrated_pcts(self) -> list[Interval]:
        return [(num(e, "calibrated_pct"), num(e, "calibrated_low"), num(e, "calibrated_high"))
                for e in self.runs if calibrated(e)]  # fmt: skip

    def figures(self) -> dict[str, Any]:
        lat, cal = self.latencies(), self.calibrated_pcts()
        return {
            "latency_spread": spread([m for m, _, _ in lat]),
            "calibrated_spread": spread([m for m, _, _ in cal]),
            "latency_coverage": list(coverage(lat)),
            "calibrated_coverage": list(coverage(cal)),
            "calibrated_runs": len(cal),
        }


def pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value * 100:.{digits}f}%"


def plus_minus(value: float | None) -> str:
    return "—" if value is None else f"±{value * 100:.1f}%"


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1e3:.3f}"


def fraction(hits_pairs: Sequence[int]) -> str:
    hits, pairs = hits_pairs
    return f"{hits}/{pairs}" if pairs else "—"


def text(value: object) -> str:
    return "—" if value is None or value == "" else str(value)


def table_of(p: Problem, kernel_kind: str) -> Table:
    table = Table(title=f"{p.name}: {kernel_kind} kernel, {len(p.runs)} separate evaluations")
    table.add_column("run")
    for col in ("status", "ms", "±95%", "session", "drift", "calibrated %", "±95%",
                "tables use", "cached %", "noise"):  # fmt: skip
        table.add_column(col, justify="right")
    for i, (e, hog) in enumerate(zip(p.runs, p.hog_runs, strict=True)):
        latency = num(e, "latency_s")
        share = num(e, "calibrated_pct")
        table.add_row(
            f"{i + 1}{' (memory hog)' if hog else ''}",
            text(e.get("status")),
            ms(latency),
            plus_minus(half_width(num(e, "ci_low_s"), num(e, "ci_high_s"), latency)),
            plus_minus(num(e, "session_ci")),
            pct(num(e, "drift")),
            pct(share),
            plus_minus(half_width(num(e, "calibrated_low"), num(e, "calibrated_high"), share)),
            text(e.get("ceiling")),
            pct(num(e, "cached_pct")),
            pct(num(e, "noise")),
            end_section=i == len(p.runs) - 1,
        )
    f = p.figures()
    blank = [""] * 3
    table.add_row("spread", "", pct(f["latency_spread"]), *blank, pct(f["calibrated_spread"]),
                  "", f"{f['calibrated_runs']} calibrated", "", "")  # fmt: skip
    table.add_row("coverage", "", fraction(f["latency_coverage"]), *blank,
                  fraction(f["calibrated_coverage"]), "", "", "", "")  # fmt: skip
    return table


def summary(problems: Sequence[Problem]) -> list[str]:
    lines = []
    for label, key in (("latency", "latency"), ("calibrated %", "calibrated")):
        spreads = [(f[f"{key}_spread"], p.name) for p in problems
                   if (f := p.figures())[f"{key}_spread"] is not None]  # fmt: skip
        hits = sum(p.figures()[f"{key}_coverage"][0] for p in problems)
        pairs = sum(p.figures()[f"{key}_coverage"][1] for p in problems)
        worst = max(spreads) if spreads else None
        spread_text = f"spread at most {pct(worst[0])} ({worst[1]})" if worst else "spread —"
        share = f" ({hits / pairs * 100:.0f}%)" if pairs else ""
        lines.append(f"{label}: {spread_text}; coverage {fraction([hits, pairs])}{share} of "
                     "medians within another run's stated interval")  # fmt: skip
    runs = sum(len(p.runs) for p in problems)
    used = sum(p.figures()["calibrated_runs"] for p in problems)
    lines[-1] += f"; {used} of {runs} runs had a calibrated figure"
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="separate evaluations per problem")
    parser.add_argument("--hog-run", type=int, default=1,
                        help="which run (1-based) has the memory hog on; 0: none")  # fmt: skip
    parser.add_argument("--kernel", default="baseline", choices=("baseline", "expert"))
    parser.add_argument("--workload", default="cpu")
    parser.add_argument("--problem", action="append", help="only this problem (repeatable)")
    parser.add_argument("--json", type=Path, help="write the raw per-run figures here")
    share = "evaluate on every CPU, the hog's too (default: every run on the CPUs the hog leaves"
    share += " free, so that it competes for memory, not CPU)"
    parser.add_argument("--share-cpus", action="store_true", help=share)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if not 0 <= args.hog_run <= args.runs:
        parser.error(f"--hog-run must be between 0 and --runs ({args.runs})")
    from accelopt.problems import load_problem

    # The hog takes the last CPU (hog.py); a neighbouring VM competes for memory, not for this
    # VM's CPUs, so by default every run (with the hog or not) evaluates on the others.
    free = set(os.sched_getaffinity(0)) - {max(os.sched_getaffinity(0))}
    cpus = None if args.share_cpus or args.hog_run == 0 or not free else free
    console = Console(width=160)
    problems: list[Problem] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.problem or DEFAULT_PROBLEMS:
            kernel = load_problem(name).kernel_path(args.kernel)
            if not kernel.is_file():
                skipped.append(name)
                print(f"skipping {name}: no {args.kernel} kernel ({kernel})", flush=True)
                continue
            p = Problem(name, kernel)
            for run in range(1, args.runs + 1):
                hog = run == args.hog_run
                print(f"{name}: run {run} of {args.runs}{' with the memory hog' if hog else ''}"
                      "...", flush=True)  # fmt: skip
                load = hogs(memory=True) if hog else contextlib.nullcontext()
                with load:
                    out = Path(tmp) / f"{name}-{run}.json"
                    e = evaluate(name, kernel, args.workload, out, cpus)
                p.runs.append(e)
                p.hog_runs.append(hog)
            problems.append(p)
            console.print(table_of(p, args.kernel))
    for line in summary(problems):
        print(line)
    if skipped:
        print(f"skipped (no {args.kernel} kernel): {', '.join(skipped)}")
    if args.json:
        raw = {
            "kernel": args.kernel,
            "workload": args.workload,
            "runs": args.runs,
            "hog_run": args.hog_run,
            "skipped": skipped,
            "problems": [
                {"problem": p.name, "kernel_path": str(p.kernel), **p.figures(),
                 "runs": [{"run": i + 1, "hog": hog, **{k: v for k, v in e.items()
                                                       if k not in DROPPED}}
                          for i, (e, hog) in enumerate(zip(p.runs, p.hog_runs, strict=True))]}
                for p in problems
            ],
        }  # fmt: skip
        args.json.write_text(json.dumps(raw, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
