"""How much the harness costs around the kernel: one full evaluation per problem.

For each problem's baseline on a workload it evaluates twice in one pool: ``cold`` (fresh cache, so
the compile is real, and a fresh worker, so its start-up counts) and ``warm`` (the same kernel
again: cached object, worker already up — the steady state of a search). It prints the wall time,
its parts (compile, correctness, timing; ``other`` is worker start-up, input sets for timing and
the final verification) and the overhead ratio

    wall / (compile + kernel latency × kernel calls)

where kernel calls = correctness seeds + warm-up + timed calls: 1.0 would mean the harness adds
nothing beyond compiling and running the kernel (``other`` now includes the kernel's process, the
fresh inputs of every timed call and the float64 references of the audited timed calls), and
``beyond s``, the same difference in seconds (wall minus that denominator): what a verdict costs
beyond the kernel's own work, which does not grow as the timing ends sooner, where the ratio
does. Usage:

    python benchmarks/harness_overhead.py [--workload cpu] [--problem NAME]...
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import tempfile
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from accelopt.profiling.config import EvalConfig
    from accelopt.profiling.evaluation import Evaluation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="cpu")
    parser.add_argument("--problem", action="append")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="accelopt-bench-")
    atexit.register(shutil.rmtree, cache, ignore_errors=True)  # references run to gigabytes
    os.environ["ACCELOPT_CACHE_DIR"] = cache

    from accelopt.backends.kernel import Kernel
    from accelopt.hardware.cpu_spec import measure_cpu
    from accelopt.problems.loader import list_problems, load_problem
    from accelopt.profiling.config import EvalConfig
    from accelopt.profiling.parent.evaluator import Evaluator

    hardware = measure_cpu()
    config = EvalConfig(workers=1)
    table = Table(title=f"harness overhead, {args.workload} workload, one cold evaluation each")
    for col in ["problem", "run", "status", "wall s", "other s", "compile s", "check s", "time s",
                "kernel ms", "calls", "beyond s", "overhead"]:  # fmt: skip
        table.add_column(col, justify="left" if col in {"problem", "status"} else "right")
    for name in args.problem or list_problems():
        problem = load_problem(name)
        kernel = Kernel(problem.kernel_path("baseline").read_text(), "cpu", "baseline")
        with Evaluator(hardware, config) as evaluator:
            for run in ("cold", "warm"):
                add_row(
                    table, name, run, evaluator.evaluate(kernel, problem, args.workload), config
                )
    Console(width=150).print(table)
    print(f"harness: {config.seeds} seeds, >= {config.min_calls} calls and {config.min_time_s} s")


def add_row(table: Table, name: str, run: str, e: Evaluation, config: EvalConfig) -> None:
    parts = (e.compile_s or 0) + (e.check_s or 0) + (e.time_s or 0)
    extra = config.warmup_calls if e.calls else 0  # the untimed warm-up
    calls = config.seeds + extra + e.calls
    compile_s = 0.0 if e.compile_cached else (e.compile_s or 0)
    useful = compile_s + (e.latency_s or 0) * calls
    table.add_row(
        name, run, e.status.value, f"{e.wall_s:.2f}", f"{(e.wall_s or 0) - parts:.2f}",
        f"{e.compile_s or 0:.2f}", f"{e.check_s or 0:.2f}", f"{e.time_s or 0:.2f}",
        f"{(e.latency_s or 0) * 1e3:.2f}", str(calls), f"{(e.wall_s or 0) - useful:.2f}",
        f"{(e.wall_s or 0) / useful:.2f}",
    )  # fmt: skip


if __name__ == "__main__":
    main()
