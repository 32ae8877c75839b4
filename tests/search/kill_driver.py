"""One session of a run for test_kill_resume.py: starts (or resumes) a matmul run and writes each
phase the loop enters to a log, so that the test can SIGKILL it in a chosen phase.

    python kill_driver.py WORKSPACE CONFIG HARDWARE_JSON PHASE_LOG [--resume RUN] [--search JSON]

``--search``: the SearchConfig fields of a new run, as JSON (default: ``SEARCH``);
``--fake``: evaluations from ``fake_runner.py`` (no kernel is compiled or run); ``--workloads``:
the tuned workloads of a new run, comma-separated (default: small).

Every child is made "unsure" against its parent by the evaluations alone (``compare`` patched, and
``slower``: no child is slower by them either), so that every iteration settles its children in a
one-session re-timing; the session's verdict, on real measurements, decides.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from agents_pool import variant
from fake_runner import fake_profiler

from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.config import load_config
from accelopt.problems.loader import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.search import lessons, settling
from accelopt.search import run as run_module
from accelopt.search.config import SearchConfig
from accelopt.search.run import RunInputs, RunTarget, execute_run, new_run
from accelopt.search.selection import Comparison
from accelopt.search.workloads import choose_workloads
from accelopt.store.store import Store

SEARCH = SearchConfig(beam=2, plans=2, samples=1, iterations=2, fixer=1, references=False)
EVAL = EvalConfig(seeds=2, min_calls=5, min_time_s=0.02, ci_time_cap_s=0.5, workers=2)


def always_unsure(child: Evaluation, parent: Evaluation) -> Comparison:
    both = child.passed and parent.passed and child.latency_s and parent.latency_s
    return Comparison.UNSURE if both else Comparison.NOT_FASTER


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("workspace", "config", "hardware", "phases"):
        parser.add_argument(name, type=Path)
    parser.add_argument("--resume")
    parser.add_argument("--search", type=json.loads, default=None)
    parser.add_argument("--fake", action="store_true")
    parser.add_argument("--workloads", default="small")
    args = parser.parse_args()
    if args.fake:
        run_module.make_profiler = fake_profiler  # type: ignore[assignment]
    search = SearchConfig(**args.search) if args.search else SEARCH
    settling.compare = always_unsure  # type: ignore[assignment]
    lessons.slower = lambda child, parent: False  # type: ignore[assignment]
    hardware = HardwareSpec.model_validate_json(args.hardware.read_text())
    llm = load_config(args.config)
    with args.phases.open("a", buffering=1) as log, Store.open(args.workspace) as store:

        def on_phase(name: str, t: int) -> None:
            log.write(f"{name} {t}\n")

        run = store.get_run(args.resume) if args.resume else None
        if run is None:
            problem = load_problem("matmul")
            chosen = choose_workloads(problem, args.workloads.split(","))
            sizes = {w: problem.workload(w).sizes for w in chosen.all}
            target = RunTarget("matmul", chosen.primary, "cpu", hardware, workloads=chosen,
                               sizes=sizes)  # fmt: skip
            run = new_run(store, target, search, llm, variant("slow"))
        log.write(f"run {run.id}\n")
        inputs = RunInputs(llm, hardware, EVAL, check_llm=False, on_phase=on_phase)
        execute_run(store, run, inputs, resume=args.resume is not None)


if __name__ == "__main__":
    main()
