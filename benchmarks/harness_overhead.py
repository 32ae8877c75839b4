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
does.

``--ab N``: instead, what leaving disturbed batches out (``worker/disturbance.py``: reading the
kernel's threads' run delay around every batch, the timing thread bound beside the main thread's)
costs a quiet verdict: each problem's baseline is evaluated warm N times with the detection off
(A, ``detect_disturbance: false``) and N times with it on (B), interleaved A B A B in one session,
and the table gives the median ``beyond s`` of each and B / A. Usage:

    python benchmarks/harness_overhead.py [--workload cpu] [--problem NAME]... [--ab N]
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
    parser.add_argument("--ab", type=int, default=0, help="A/B of the disturbance detection")
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
    if args.ab:
        ab(hardware, args.problem or list_problems(), args.workload, args.ab)
        return
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


def ab(hardware: object, problems: list[str], workload: str, repeats: int) -> None:
    """Warm verdicts with the disturbance detection off (A) and on (B), interleaved."""
    import statistics

    from accelopt.backends.kernel import Kernel
    from accelopt.problems.loader import load_problem
    from accelopt.profiling.config import EvalConfig
    from accelopt.profiling.parent.evaluator import Evaluator

    configs = {"A": EvalConfig(workers=1, detect_disturbance=False), "B": EvalConfig(workers=1)}
    table = Table(title=f"beyond s per warm verdict, {workload} workload, {repeats} each, A B A B")
    for col in ["problem", "A: off", "B: on", "B / A", "B clean batches", "B disturbed"]:
        table.add_column(col, justify="left" if col == "problem" else "right")
    with Evaluator(hardware, configs["A"]) as a, Evaluator(hardware, configs["B"]) as b:  # type: ignore[arg-type]
        for name in problems:
            problem = load_problem(name)
            kernel = Kernel(problem.kernel_path("baseline").read_text(), "cpu", "baseline")
            a.evaluate(kernel, problem, workload)  # both warm: compiled, workers up
            b.evaluate(kernel, problem, workload)
            beyond: dict[str, list[float]] = {"A": [], "B": []}
            last = None
            for _ in range(repeats):
                for key, evaluator in (("A", a), ("B", b)):
                    e = evaluator.evaluate(kernel, problem, workload)
                    beyond[key].append(beyond_s(e, configs[key]))
                    last = e if key == "B" else last
            ma, mb = statistics.median(beyond["A"]), statistics.median(beyond["B"])
            table.add_row(name, f"{ma:.3f}", f"{mb:.3f}", f"{mb / ma:.2f}" if ma > 0 else "—",
                          str(last.clean_batches if last else "—"),
                          str(last.disturbed_batches if last else "—"))  # fmt: skip
    Console(width=150).print(table)


def beyond_s(e: Evaluation, config: EvalConfig) -> float:
    """Wall minus compile and the kernel's own calls: what the verdict cost beyond them."""
    extra = config.warmup_calls if e.calls else 0
    calls = config.seeds + extra + e.calls
    compile_s = 0.0 if e.compile_cached else (e.compile_s or 0)
    return (e.wall_s or 0) - (compile_s + (e.latency_s or 0) * calls)


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
