"""What the optimization loop costs around the evaluations it waits for.

A scripted OpenAI-compatible server answers every agent at once: the planner with a plan, the
executor with a distinct correct matmul kernel each time (a tagged copy of the i-k-j loop, so no
two candidates share a hash), the summarizer with a lesson. One run with B=4, N=4, K=2, T=2 on the
`small` matmul workload, evaluations on one worker so that their time adds up. It prints the wall
time; the time spent evaluating, as the profiler measured each evaluation from the request to its
verdict (static checks, the worker's set-up of the kernel's process and buffers, compile,
correctness, timing, verification) plus the one-session re-timings of unsure children; of that,
the part the kernel itself took (compile + correctness + timing, as each evaluation reports them);
and the orchestration: wall minus evaluating (LLM round trips, prompts, parsing, the store,
profiles for the planner, hand-offs), as a share of the wall time and per candidate; and the
verdicts: candidates that passed, were raced (stopped early, clearly slower than their parent),
and were kept as faster than their parent. Every candidate is the baseline's loop with a tag, so
"kept" should be 0: each one is a gain the machine's drift made. Usage:

    python benchmarks/loop_overhead.py [--iterations 2] [--workers 1]
"""

from __future__ import annotations

import argparse
import atexit
import itertools
import json
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

KERNEL = """#include <stddef.h>
#include <string.h>
void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
    volatile int tag = TAG; (void)tag;
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        float *o = out + (size_t)i * N;
        memset(o, 0, sizeof(float) * N);
        for (int k = 0; k < K; k++) {
            const float a = lhs[(size_t)i * K + k];
            const float *r = rhs + (size_t)k * N;
            for (int j = 0; j < N; j++) o[j] += a * r[j];
        }
    }
}
"""


class Team:
    """Instant, always-usable replies; a new kernel for every executor call."""

    def __init__(self) -> None:
        self.tags = itertools.count(1)
        self.lock = threading.Lock()

    def __call__(self, request):
        from accelopt.testing.scripted import Reply

        if request.model == "executor":
            with self.lock:
                tag = next(self.tags)
            return Reply(f"```c\n{KERNEL.replace('TAG', str(tag))}```")
        if request.model == "summarizer":
            found = re.search(r"measured ([\d.]+)x", request.messages[-1]["content"])
            return Reply(f"TITLE: tagged copy\nLESSON: A tag costs nothing ({found.group(1)}x).")
        return Reply("TITLE: tag the kernel\nSTEPS:\n1. Add a volatile tag.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="accelopt-loop-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # its caches run to gigabytes
    os.environ["ACCELOPT_CACHE_DIR"] = str(tmp / "cache")

    from accelopt.hardware.cpu_spec import measure_cpu
    from accelopt.llm.config import Config
    from accelopt.profiling.config import EvalConfig
    from accelopt.profiling.evaluation import Evaluation
    from accelopt.search.config import SearchConfig
    from accelopt.search.evaluations import run_evaluations
    from accelopt.search.run import RunInputs, execute_run, new_run
    from accelopt.store.store import Store
    from accelopt.testing.scripted import ScriptedServer

    hardware = measure_cpu()
    search = SearchConfig(beam=4, plans=4, samples=2, iterations=args.iterations, fixer=1)
    eval_config = EvalConfig(workers=args.workers)
    with ScriptedServer(default=Team()) as server, Store.open(tmp / "ws") as store:
        agents = {a: {"model": a} for a in ("planner", "executor", "fixer", "summarizer")}
        default = {"base_url": server.base_url, "model": "m", "price_in": 0, "price_out": 0}
        llm = Config.model_validate({"llm": {"default": default, **agents}})
        run = new_run(store, "matmul", "small", "cpu", hardware, search, llm)
        start = time.perf_counter()
        result = execute_run(store, run, RunInputs(llm, hardware, eval_config), resume=False)
        wall = time.perf_counter() - start
        evaluations = run_evaluations(store, run)
        hashes = {k.hash for k in store.kernels(run.id)} - set(evaluations)
        query = "SELECT kernel_hash, data FROM evaluations WHERE harness_version LIKE ?"
        rows = store._connection().execute(query, ("%+raced:%",)).fetchall()
        # children stopped early, clearly slower than their parent (racing): kept apart
        raced = [Evaluation.model_validate_json(data) for digest, data in rows if digest in hashes]
        sessions = (
            store._connection()
            .execute("SELECT data, kernels FROM retimings WHERE run_id = ?", (run.id,))
            .fetchall()
        )
        requests = len(server.requests)
        bests = [it.best_hash for it in store.iterations(run.id)]
    # the verdicts: every candidate is the baseline's loop with a tag, as fast as its parent, so
    # a kept improvement is one the machine's drift made (``selection.compare``)
    kept_pairs = [(a, b) for a, b in itertools.pairwise(bests) if a != b]
    kept = len(kept_pairs)
    passed = sum(e.status == "PASSED" for e in evaluations.values())
    measured = [*evaluations.values(), *raced]
    evaluated = len(measured)
    kernel_s = sum((e.compile_s or 0.0) + (e.check_s or 0.0) + (e.time_s or 0.0) for e in measured)
    session_s = sum(json.loads(row[0])["evaluations"][0]["wall_s"] or 0.0 for row in sessions)
    eval_s = sum(e.wall_s or 0.0 for e in measured) + session_s
    orchestration = wall - eval_s / args.workers
    table = Table(title=f"loop overhead: B=4 N=4 K=2 T={args.iterations}, matmul small")
    for col in ("status", "LLM requests", "candidates", "passed", "raced", "kept", "re-timings",
                "wall s",
                "evaluating s",
                "of which kernel s", "orchestration s", "orchestration %", "per candidate ms",
                "candidates / min"):  # fmt: skip
        table.add_column(col, justify="right")
    table.add_row(
        result.status, str(requests), str(evaluated), str(passed), str(len(raced)), str(kept),
        str(len(sessions)),
        f"{wall:.1f}",
        f"{eval_s:.1f}", f"{kernel_s:.1f}", f"{orchestration:.2f}",
        f"{orchestration / wall:.1%}", f"{orchestration / max(evaluated, 1) * 1e3:.0f}",
        f"{evaluated / wall * 60:.0f}",
    )  # fmt: skip
    Console(width=200).print(table)
    for parent, child in kept_pairs:  # which rule believed each kept look-alike
        evidence = verdict(parent, child, sessions, evaluations)
        print(f"kept {child[:8]} over {parent[:8]}: {evidence}")
    n = max(evaluated, 1)
    parts = {name: sum(getattr(e, f"{name}_s") or 0.0 for e in measured) / n
             for name in ("compile", "check", "time", "wall")}  # fmt: skip
    print(f"per candidate: compile {parts['compile']:.2f} s, check {parts['check']:.2f} s, "
          f"timing {parts['time']:.2f} s, evaluation wall {parts['wall']:.2f} s")  # fmt: skip
    print(f"evaluation workers: {args.workers}; per evaluation: {eval_config.seeds} seeds, "
          f">= {eval_config.min_calls} calls and {eval_config.min_time_s} s of timing")  # fmt: skip


def verdict(parent: str, child: str, sessions: list, evaluations: dict) -> str:
    """A kept child's evidence: the session that re-timed it beside that parent, or the two
    separate evaluations (latency and reported interval)."""
    twins_first = sorted(sessions, key=lambda row: not json.loads(row[0]).get("twin"))
    for data, kernels in twins_first:  # the session that decided: beside the parent's twin
        hashes, found = json.loads(kernels), json.loads(data)
        if hashes[0] == parent and child in hashes:
            i = hashes.index(child)
            twin = f", the parent's twin {found['ratios'][1]:.3f}" if found.get("twin") else ""
            return f"session ratio {found['ratios'][i]:.3f} +- {found['ratio_ci'][i]:.1%}{twin}"
    a, b = evaluations.get(parent), evaluations.get(child)
    if a is None or b is None or not a.latency_s or not b.latency_s:
        return "separate evaluations (not both in this run)"
    return (f"separate evaluations {b.latency_s * 1e6:.1f} us (+- {b.ci or 0:.1%}) against "
            f"{a.latency_s * 1e6:.1f} us (+- {a.ci or 0:.1%})")  # fmt: skip


if __name__ == "__main__":
    main()
