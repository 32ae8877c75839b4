"""Profiler throughput: evaluations per minute, local pool vs Ray actors, on this machine.

For each configuration — the local pool with 1 and 2 worker processes, and the ray profiler with
1 and 2 device actors (each actor owning a pool of ``--actor-workers`` processes, 1 by default, so
that N actors and N local workers run the same number of evaluations at once) — it evaluates a
batch of distinct kernels (the silu baseline with a ``volatile int tag = i;`` line, so every hash
and every compile differs) twice: ``--check-only`` and with timing. Throughput is

    evaluations per minute = kernels / batch wall time × 60

with the actors already started (their start-up is shown apart). The Ray overhead per evaluation
is measured on one kernel at a time, one worker or one actor:

    overhead = time for ``profiler.evaluate`` as the caller sees it − ``Evaluation.wall_s``

(``wall_s`` is the Evaluator's own time, inside the actor for Ray), for both profilers. The Ray
instance is local, on 127.0.0.1, started once. Usage:

    python benchmarks/profiler_throughput.py [--kernels 32] [--workload small] [--actor-workers 1]
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from accelopt.backends.kernel import Kernel
    from accelopt.hardware.spec import HardwareSpec
    from accelopt.profiling.config import EvalConfig
    from accelopt.profiling.parent.cache import CachedProfiler


@dataclass
class Row:
    profiler: str
    parallel: int
    processes: int
    mode: str
    kernels: int
    start_s: float
    wall_s: float
    statuses: str

    @property
    def per_minute(self) -> float:
        return self.kernels / self.wall_s * 60


def kernels(count: int, first_tag: int) -> list[Kernel]:
    from accelopt.backends.kernel import Kernel
    from accelopt.problems.loader import load_problem

    source = load_problem("silu").kernel_path("baseline").read_text()
    return [
        Kernel(source.replace("{", f"{{ volatile int tag = {t}; (void)tag;", 1), "cpu", f"t{t}")
        for t in range(first_tag, first_tag + count)
    ]


def make(kind: str, n: int, hardware: HardwareSpec, config: EvalConfig, actor_workers: int):
    from accelopt.profiling.cluster.runner import RayOptions, RayRunner
    from accelopt.profiling.parent.cache import CachedProfiler
    from accelopt.profiling.parent.local import LocalRunner

    if kind == "local":
        config = config.model_copy(update={"workers": n})
        return CachedProfiler("local", hardware, config, LocalRunner(hardware, config)), n
    config = config.model_copy(update={"workers": actor_workers})
    runner = RayRunner(hardware, config, RayOptions(actors=n))
    runner.wait_ready(n, 120)
    return CachedProfiler("ray", hardware, config, runner), n * actor_workers


def batch(profiler: CachedProfiler, todo: list[Kernel], workload: str) -> tuple[float, str]:
    from accelopt.problems.loader import load_problem

    silu = load_problem("silu")
    start = time.perf_counter()
    found = [e for _, e in profiler.evaluate_batch([(k, silu, workload) for k in todo])]
    wall = time.perf_counter() - start
    counts = Counter(e.status.value for e in found)
    return wall, " ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def overhead(profiler: CachedProfiler, single: list[Kernel], workload: str) -> list[float]:
    from accelopt.problems.loader import load_problem

    silu = load_problem("silu")
    extra = []
    for kernel in single:
        start = time.perf_counter()
        evaluation = profiler.evaluate(kernel, silu, workload)
        extra.append(time.perf_counter() - start - (evaluation.wall_s or 0.0))
    return extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=32)
    parser.add_argument("--workload", default="small")
    parser.add_argument("--actor-workers", type=int, default=1)
    parser.add_argument("--overhead-samples", type=int, default=8)
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="accelopt-bench-")
    atexit.register(shutil.rmtree, cache, ignore_errors=True)  # references run to gigabytes
    os.environ["ACCELOPT_CACHE_DIR"] = cache
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private instance on 127.0.0.1
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    import ray
    from accelopt.hardware.cpu_spec import measure_cpu
    from accelopt.profiling.config import EvalConfig

    hardware = measure_cpu()
    ray.init(
        include_dashboard=False, num_cpus=0, resources={"accelopt_cpu": 2},
        _temp_dir=tempfile.mkdtemp(prefix="ray-", dir="/tmp"), _node_ip_address="127.0.0.1",
        log_to_driver=False, logging_level=logging.WARNING,
    )  # fmt: skip
    rows: list[Row] = []
    overheads: dict[str, list[float]] = {}
    tag = 0
    try:
        for kind, n in [("local", 1), ("local", 2), ("ray", 1), ("ray", 2)]:
            for check_only in (True, False):
                config = EvalConfig(check_only=check_only)
                start = time.perf_counter()
                profiler, processes = make(kind, n, hardware, config, args.actor_workers)
                start_s = time.perf_counter() - start
                with profiler:
                    tag += args.kernels
                    wall, statuses = batch(profiler, kernels(args.kernels, tag), args.workload)
                    mode = "check-only" if check_only else "timed"
                    row = Row(kind, n, processes, mode, args.kernels, start_s, wall, statuses)
                    rows.append(row)
                    if n == 1 and not check_only:
                        tag += args.overhead_samples
                        single = kernels(args.overhead_samples, tag)
                        overheads[kind] = overhead(profiler, single, args.workload)
    finally:
        ray.shutdown()
    Console(width=150).print(table(rows, args))
    for kind, extra in overheads.items():
        print(
            f"{kind}: caller-side time beyond the Evaluator's own, per evaluation: median "
            f"{statistics.median(extra) * 1e3:.1f} ms, max {max(extra) * 1e3:.1f} ms "
            f"({len(extra)} sequential evaluations)"
        )
    if {"local", "ray"} <= overheads.keys():
        ray_ms = statistics.median(overheads["ray"]) - statistics.median(overheads["local"])
        print(f"Ray overhead per evaluation (ray - local): {ray_ms * 1e3:.1f} ms")


def table(rows: list[Row], args: argparse.Namespace) -> Table:
    title = (
        f"profiler throughput: {args.kernels} distinct silu kernels, {args.workload} workload, "
        f"{os.cpu_count()} cores"
    )
    out = Table(title=title)
    for col in ["profiler", "workers/actors", "processes", "mode", "start s", "batch s",
                "evals/min", "s/eval", "statuses"]:  # fmt: skip
        out.add_column(col, justify="left" if col in {"profiler", "mode", "statuses"} else "right")
    for r in rows:
        out.add_row(
            r.profiler, str(r.parallel), str(r.processes), r.mode, f"{r.start_s:.2f}",
            f"{r.wall_s:.2f}", f"{r.per_minute:.0f}", f"{r.wall_s / r.kernels:.3f}", r.statuses,
        )  # fmt: skip
    return out


if __name__ == "__main__":
    main()
