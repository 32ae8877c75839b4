"""Two checks on a busy machine, each while other processes load it (``--hog``, the hogs of
``benchmarks/hog.py``).

``--scenario bench`` (the default): verdicts. The suite's honest baselines, timed under load, must
come out PASSED every time (never SUSPICIOUS or TIMEOUT); their noise and the load are reported.
The hogs: ``cpu``, a spinning Python loop; ``memory``, streaming copies between two 256 MiB arrays
on one core; ``both`` (the default here), the two, each pinned to its own CPU where there are two
or more (the memory hog on the last CPU of the affinity mask, the spinner on the one before). It
runs ``accelopt bench run --kernel baseline`` RUNS (3) times in a row, stops the hogs, and prints
per problem and run the status, % of peak with the ceiling it used (``calibrated``: against the
control micro-benchmark timed with the kernel, so the load cancels; ``cached``: against this
machine's stored ceiling), the % against the cached ceiling, noise (IQR/median), the median's
95 % interval and the share of the CPUs other processes took while the kernel was timed. The
table's title says which hogs ran, and where. Exit status 1 when any honest baseline was not
PASSED.

``--scenario search``: what a search keeps. Two searches whose faster kernel is beyond doubt
(8x on ``small``, over 30x on ``cpu`` on a quiet 2-core machine), each run RUNS (5) times under
each ``--hog`` given (repeatable; ``busy``, the default here: 2 CPU spinners on every CPU of the
affinity mask and the memory hog; ``none``: no hogs, which is not a quiet machine where other
work runs; the bench mode's three also work):
- ``autotune``: ``accelopt optimize matmul --strategy autotune --iterations 1`` from a matmul whose
  one declared tunable ``ORDER`` picks the loop order, as written ``ORDER 0`` (i-j-k: a strided
  walk down a column of rhs, not vectorized) and ``ORDER 1`` (i-k-j: rows of rhs streamed,
  vectorized), on each ``--workload`` (default: ``small``, then ``cpu``); it must keep ORDER=1.
- ``beam``: ``accelopt optimize matmul --beam 1 --plans 1 --samples 1 --iterations 1`` from the
  i-j-k kernel, on the first workload, whose LLM is a scripted OpenAI-compatible server on
  127.0.0.1 (``accelopt.testing.scripted``, one model per agent in a config the run is given, and
  ``ACCELOPT_LLM_BASE_URL``): the executor always answers the i-k-j kernel; it must keep that.
Every ``accelopt`` invocation gets a fresh workspace (a temporary folder, also its working
folder) and shares this machine's cache (``ACCELOPT_CACHE_DIR`` as set, else the default), so
the ceilings are measured once. It prints per run the scenario, workload, load, what the run
kept (the ORDER value of its best kernel; for beam, which kernel its best is, by hash), the
speedup the run reported and its wall seconds, then "kept the faster kernel in X of Y runs".
For a run that kept the slower kernel the note is the run's own last sentence (autotune: why no
variant won). Exit status 1 when any run kept the slower kernel (or failed). ``--strategy``
picks one of the two searches (repeatable); ``--keep DIR`` keeps each run's folder (workspace,
starting kernel, JSON and ``output.txt``, what it printed) under DIR.

Both first make sure this machine's ceilings are measured, before any hog starts (on a quiet
machine: run it when nothing else runs). Usage:

    python benchmarks/busy_machine.py [--scenario bench] [--hog both|cpu|memory] [--runs 3]
        [--workload cpu] [--problem NAME]...
    python benchmarks/busy_machine.py --scenario search [--hog busy|none|...]... [--runs 5]
        [--workload small --workload cpu] [--strategy autotune|beam]... [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from hog import hogs

if TYPE_CHECKING:
    from accelopt.testing.scripted import RecordedRequest, Reply

# What each --hog runs: hogs()'s keyword arguments.
HOGS: dict[str, dict[str, Any]] = {
    "cpu": {"cpu": True},
    "memory": {"memory": True},
    "both": {"cpu": True, "memory": True},
    "busy": {"cpu": True, "memory": True, "spinners_per_cpu": 2},
    "none": {},
}
DEFAULT_HOG = {"bench": "both", "search": "busy"}
DEFAULT_RUNS = {"bench": 3, "search": 5}
STRATEGIES = ("autotune", "beam")
RUN_TIMEOUT_S = 1800.0  # one accelopt invocation, even on a loaded machine
AGENTS = ("planner", "executor", "fixer", "summarizer")


def accelopt(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "accelopt", *args], capture_output=True, text=True, check=False,
        cwd=cwd, env=env, timeout=timeout,
    )  # fmt: skip


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


def bench(hog: str, runs_wanted: int, workload: str, problems: list[str]) -> int:
    """The honest baselines' verdicts under the load ``hog``."""
    runs: list[list[dict[str, object]]] = []
    with hogs(**HOGS[hog]) as load, tempfile.TemporaryDirectory() as tmp:
        print(f"hogs running: {load.describe()}", flush=True)
        for run in range(runs_wanted):
            print(f"run {run + 1} of {runs_wanted} under load ({load.kinds})...", flush=True)
            runs.append(bench_run(workload, problems, Path(tmp) / f"{run}.json"))
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


# --- --scenario search ---------------------------------------------------------------------------

_PREAMBLE = """#include <stddef.h>
#include <string.h>
"""
_IJK = """#pragma omp parallel for
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += lhs[(size_t)i * K + k] * rhs[(size_t)k * N + j];
            out[(size_t)i * N + j] = acc;
        }
"""
_IKJ = """#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        float *o = out + (size_t)i * N;
        memset(o, 0, sizeof(float) * N);
        for (int k = 0; k < K; k++) {
            const float a = lhs[(size_t)i * K + k];
            const float *r = rhs + (size_t)k * N;
            for (int j = 0; j < N; j++)
                o[j] += a * r[j];
        }
    }
"""
_SIGNATURE = (
    "void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {\n"
)

SLOW = f"""/* matmul, i-j-k order: a dot product per output, walking down a column of rhs. */
{_PREAMBLE}
{_SIGNATURE}{_IJK}}}
"""
FAST = f"""/* matmul, i-k-j order: rows of rhs streamed into a row of out (vectorized). */
{_PREAMBLE}
{_SIGNATURE}{_IKJ}}}
"""
TUNABLE = f"""/* matmul with one tunable, the loop order. ORDER 0: i-j-k, a dot product per
 * output walking down a column of rhs (strided, not vectorized); ORDER 1: i-k-j, rows of rhs
 * streamed into a row of out (contiguous, vectorized). */
{_PREAMBLE}
#ifndef ORDER
#define ORDER 0 /* tune: 0 1 */
#endif

{_SIGNATURE}#if ORDER == 0
{_IJK}#else
{_IKJ}#endif
}}
"""
FAST_ORDER = "1"


class Team:
    """The scripted LLM agents of the beam scenario, one model per agent: one plan (the loop
    order), whose executor (and fixer, should it be asked) always writes the i-k-j kernel."""

    def __call__(self, request: RecordedRequest) -> Reply:
        from accelopt.testing.scripted import Reply

        code = f"Here is the kernel.\n```c\n{FAST}```\n"
        replies = {
            "planner": "TITLE: Loop order i-k-j\nSTEPS:\n1. Swap the j and k loops so that the"
            " inner loop streams rows of rhs into a row of out.\n",
            "executor": code,
            "fixer": code,
            "summarizer": "NO LESSON",
        }
        if request.model not in replies:
            return Reply(status=404, content=f"no agent {request.model!r} (scripted)")
        return Reply(replies[request.model])


def write_config(path: Path) -> Path:
    """One model per agent; the endpoint comes from ACCELOPT_LLM_BASE_URL."""
    agents = "".join(f"  {a}: {{model: {a}}}\n" for a in AGENTS)
    path.write_text(
        "llm:\n  default: {model: scripted, max_retries: 2, retry_base_s: 0}\n" + agents
    )
    return path


@dataclass
class SearchRun:
    scenario: str
    workload: str
    load: str
    run: int
    kept: str = "—"
    faster: bool = False
    speedup: float | None = None
    wall_s: float = 0.0
    note: str = ""


def optimize(
    scenario: str, workload: str, run: SearchRun, base_url: str | None, keep: Path | None
) -> SearchRun:
    """One ``accelopt optimize`` in a fresh workspace (a temporary folder, or one under ``keep``
    that stays, with the run's output in ``output.txt``); ``run`` filled in with what it kept."""
    from accelopt.backends.kernel import Kernel
    from accelopt.backends.tunables import find_tunables, values_of

    place: contextlib.AbstractContextManager[str]
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        name = f"{scenario}-{workload}-{run.load}-{run.run}-"
        place = contextlib.nullcontext(tempfile.mkdtemp(prefix=name, dir=keep))
    else:
        place = tempfile.TemporaryDirectory(prefix=f"busy-{scenario}-")
    with place as tmp:
        folder = Path(tmp)
        start = folder / "start.c"
        start.write_text(TUNABLE if scenario == "autotune" else SLOW)
        out = folder / "run.json"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("ACCELOPT_LLM_") and k != "ACCELOPT_WORKSPACE"}  # fmt: skip
        args = ["optimize", "matmul", "--kernel", str(start), "--workload", workload,
                "--iterations", "1", "--workspace", str(folder / "ws"),
                "--json", str(out)]  # fmt: skip
        if scenario == "autotune":
            args += ["--strategy", "autotune"]
        else:
            assert base_url is not None
            env["ACCELOPT_LLM_BASE_URL"] = base_url
            args += ["--strategy", "beam", "--beam", "1", "--plans", "1", "--samples", "1",
                     "--config", str(write_config(folder / "accelopt.yaml"))]  # fmt: skip
        began = time.monotonic()
        try:
            done = accelopt(*args, cwd=folder, env=env, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            run.wall_s = time.monotonic() - began
            run.note = f"timed out after {RUN_TIMEOUT_S:.0f} s"
            return run
        run.wall_s = time.monotonic() - began
        (folder / "output.txt").write_text(done.stdout + done.stderr)
        if done.returncode != 0 or not out.exists():
            lines = (done.stderr.strip() or done.stdout.strip()).splitlines()
            run.note = f"exit {done.returncode}: {lines[-1][-120:] if lines else 'no output'}"
            return run
        result = json.loads(out.read_text())
        run.speedup = result.get("speedup")
        best = result.get("best") or {}
        if result.get("status") != "finished":
            run.note = f"run {result.get('status')}"
        if scenario == "autotune":
            path = result.get("best_kernel_path")
            source = Path(path).read_text() if path and Path(path).exists() else None
            if source is None:
                run.note = run.note or "no best kernel written"
                return run
            order = values_of(source, find_tunables(TUNABLE))["ORDER"]
            run.faster = order == FAST_ORDER
            run.kept = f"ORDER={order} ({'i-k-j' if run.faster else 'i-j-k'})"
        else:
            kept = best.get("hash")
            run.faster = kept == Kernel(FAST).hash
            names = {Kernel(FAST).hash: "i-k-j (executor's)", Kernel(SLOW).hash: "i-j-k (start)"}
            run.kept = names.get(str(kept), f"other kernel {kept}")
        if not run.faster and not run.note:
            run.note = verdict(done.stdout)
        return run


def verdict(output: str) -> str:
    """The run's last sentence of its own (autotune: "the kernel as written is already the
    fastest: ..."), for a run that kept the slower kernel: not a table, not where it wrote."""
    lines = [line.strip() for line in output.splitlines()] + [""]
    for line, after in reversed(list(itertools.pairwise(lines))):
        title = after.startswith("┏")  # a table's title
        progress = " | " in line  # the live progress line
        if line[:1].isalpha() and not (title or progress or line.startswith("best kernel")):
            return line[:200]
    return ""


def search(
    hog_names: list[str], runs_wanted: int, workloads: list[str], strategies: list[str],
    keep: Path | None,
) -> int:  # fmt: skip
    """The searches of ``strategies``, ``runs_wanted`` times under each load of ``hog_names``."""
    from accelopt.testing.scripted import ScriptedServer

    plan = [("autotune", w) for w in workloads if "autotune" in strategies]
    plan += [("beam", workloads[0])] if "beam" in strategies else []
    results: list[SearchRun] = []
    loads: list[str] = []
    with ScriptedServer(default=Team()) as server:
        for hog in hog_names:
            with hogs(**HOGS[hog]) as load:
                loads.append(f"{hog}: {load.describe()}")
                print(f"hogs running ({hog}): {load.describe()}", flush=True)
                for i in range(runs_wanted):
                    for scenario, workload in plan:
                        print(f"{scenario} on {workload}, run {i + 1} of {runs_wanted} under "
                              f"{hog}...", flush=True)  # fmt: skip
                        run = SearchRun(scenario, workload, hog, i + 1)
                        results.append(optimize(scenario, workload, run, server.base_url, keep))
    return report_search(results, loads)


def report_search(results: list[SearchRun], loads: list[str]) -> int:
    table = Table(title=f"what the search kept ({os.cpu_count()} CPUs; {'; '.join(loads)})")
    for col in ("scenario", "workload", "load", "run", "kept", "faster", "speedup", "wall s"):
        table.add_column(col, justify="right" if col in ("run", "speedup", "wall s") else "left")
    table.add_column("note")
    for r in results:
        speedup = "—" if r.speedup is None else f"{r.speedup:.2f}x"
        table.add_row(r.scenario, r.workload, r.load, str(r.run), r.kept,
                      "yes" if r.faster else "NO", speedup, f"{r.wall_s:.1f}", r.note)  # fmt: skip
    Console(width=160).print(table)
    kept = sum(r.faster for r in results)
    print(f"kept the faster kernel in {kept} of {len(results)} runs")
    return 0 if kept == len(results) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=("bench", "search"), default="bench",
                        help="bench: baselines' verdicts; search: what a search keeps")  # fmt: skip
    parser.add_argument("--runs", type=int, help="default: 3 (bench), 5 (search)")
    parser.add_argument("--workload", action="append",
                        help="default: cpu (bench); small, then cpu (search)")  # fmt: skip
    parser.add_argument("--problem", action="append", default=[], help="bench: only these")
    parser.add_argument("--hog", choices=tuple(HOGS), action="append",
                        help="the load (default: both for bench, busy for search; search: "
                        "repeatable)")  # fmt: skip
    parser.add_argument("--strategy", choices=STRATEGIES, action="append",
                        help="search: only these searches (repeatable; default: both)")  # fmt: skip
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="search: keep each run's workspace and output under DIR")  # fmt: skip
    args = parser.parse_args()
    hog_names = args.hog or [DEFAULT_HOG[args.scenario]]
    runs = DEFAULT_RUNS[args.scenario] if args.runs is None else args.runs
    if args.scenario == "bench" and (len(hog_names) > 1 or len(args.workload or []) > 1):
        parser.error("--scenario bench takes one --hog and one --workload")
    if accelopt("hardware").stdout.count("not measured yet"):
        print("measuring this machine's ceilings first (quiet)...", flush=True)
        accelopt("hardware", "--measure")
    if args.scenario == "bench":
        return bench(hog_names[0], runs, (args.workload or ["cpu"])[0], args.problem)
    workloads = args.workload or ["small", "cpu"]
    return search(hog_names, runs, workloads, args.strategy or list(STRATEGIES), args.keep)


if __name__ == "__main__":
    raise SystemExit(main())
