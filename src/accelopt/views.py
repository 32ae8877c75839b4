"""What the front ends (the command line, ``accelopt serve``, ``accelopt mcp``) show and look up
alike: the JSON of a problem and of a run, the ceilings of a backend, a problem with its workload.

This module sits below the front ends and above what it reads (problems, hardware, the store,
search and reports), so that none of the front ends imports another: ``bench list/show --json``,
``runs list/show --json``, the HTTP API and the MCP tools print the same objects from here.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from accelopt.backends import registry
from accelopt.backends.registry import shipped_kernel
from accelopt.errors import UserError
from accelopt.hardware.cache import BOUND_CEILINGS, ensure_cpu_spec, load_cpu_spec
from accelopt.hardware.roofline import roofline
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.client import Usage
from accelopt.problems.loader import load_problem
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.measurement import KernelMeasurement
from accelopt.reports.costs import ResultCost, result_cost
from accelopt.reports.run_report import lineage
from accelopt.search.evaluations import run_evaluations, run_raced
from accelopt.search.headline import stored_headline
from accelopt.search.references import best_reference, over_reference
from accelopt.search.retimings import stored_retimings
from accelopt.search.variants import VariantTable
from accelopt.search.variants import variant_tables as tuned_tables
from accelopt.search.workloads import generalization, run_workloads
from accelopt.store.records import IterationRecord, KernelOrigin, KernelRecord, RunRecord
from accelopt.store.store import Store

# --- problems -------------------------------------------------------------------------------------


def problem_json(problem: Problem) -> dict[str, Any]:
    """What ``bench list --json`` prints per problem."""
    return {
        "name": problem.name,
        "origin": problem.origin,
        "description": problem.description,
        **problem.interface(),
        "workloads": {w.name: dict(w.sizes) for w in problem.workloads.values()},
        "cost_notes": dict(problem.cost_notes),
        "requires": list(problem.requires),
    }


def workload_costs(problem: Problem, hardware: HardwareSpec) -> list[dict[str, Any]]:
    """Per workload: the cost model's terms and the roofline on ``hardware``."""
    rows = []
    for w in problem.workloads.values():
        cost = problem.cost.at(w.sizes)
        roof = roofline(cost, hardware)
        rows.append(
            {
                "workload": w.name,
                "sizes": dict(w.sizes),
                "matmul_flops": cost.matmul_flops,
                "vector_flops": cost.vector_flops,
                "bytes": cost.bytes,
                "bound": roof.bound,
                "peak_s": roof.peak_s,
            }
        )
    return rows


def problem_show_json(problem: Problem, hardware: HardwareSpec, backend: str) -> dict[str, Any]:
    """What `bench show --json` prints (and the HTTP API's /v1/problems/NAME gives)."""
    baseline = shipped_kernel(problem, "baseline", backend)
    return problem_json(problem) | {
        "hardware": hardware.name,
        "costs": workload_costs(problem, hardware),
        "kernels": [
            k for k in ("baseline", "expert") if shipped_kernel(problem, k, backend).is_file()
        ],
        "baseline_source": baseline.read_text() if baseline.is_file() else "",
    }


# --- runs -----------------------------------------------------------------------------------------


def _latency(evaluations: dict[str, Evaluation], kernel_hash: str) -> float | None:
    e = evaluations.get(kernel_hash)
    return e.latency_s if e is not None and e.passed else None


def reference_json(references: Sequence[Evaluation], best_s: float | None) -> dict[str, Any]:
    """The run's best reference (the fastest of NumPy and PyTorch it timed) and the best
    kernel's speedup over it."""
    reference = best_reference(references)
    return {
        "best_reference": reference.as_json() if reference else None,
        "speedup_over_reference": over_reference(reference, best_s),
    }


def run_row(store: Store, run: RunRecord) -> dict[str, Any]:
    """What ``runs list --json`` prints per run."""
    evaluations = run_evaluations(store, run)
    base, top = _latency(evaluations, run.baseline_hash), _latency(evaluations, run.best_hash)
    best_eval = evaluations.get(run.best_hash)
    speedup = base / top if base and top else None
    headline = stored_headline(store, run, run_workloads(run).tuned)
    if headline is not None and headline.best.passed and headline.baseline.passed:
        base, top, best_eval = headline.baseline.latency_s, headline.best.latency_s, headline.best
        speedup = headline.speedup
    usage = store.usage_by_agent(run.id)
    return {
        "run": run.id,
        "problem": run.problem,
        "workload": run.workload,
        "workloads": list(run_workloads(run).tuned),
        "held_out": list(run_workloads(run).held_out),
        "strategy": run.strategy,
        "status": run.status,
        "created_at": run.created_at,
        "baseline_latency_s": base,
        "best_latency_s": top,
        "best_pct_of_peak": best_eval.pct_of_peak if best_eval else None,
        "speedup": speedup,
        "speedup_interval": headline.interval if headline is not None else None,
        "headline": headline.as_json() if headline is not None else None,
        **reference_json(store.references(run.id), top),
        "cost_usd": sum(u.cost_usd or 0 for u in usage.values()),
    }


def variant_tables(
    store: Store,
    run: RunRecord,
    kernels: Sequence[KernelRecord] | None = None,
    evaluations: Mapping[str, Evaluation] | None = None,
) -> list[VariantTable]:
    """The variant table of every kernel of the run that was tuned (``search.variants``);
    ``kernels`` and ``evaluations``: the run's, where the caller read them already. Its raced
    kernels and re-timings are read only where a kernel was tuned."""
    found = store.kernels(run.id) if kernels is None else kernels
    if not any(k.origin == KernelOrigin.TUNED for k in found):
        return []
    evaluations = run_evaluations(store, run) if evaluations is None else evaluations
    raced = frozenset(run_raced(store, run))
    best = frozenset([run.best_hash] if run.best_hash else [])
    sessions = stored_retimings(store, run.id)
    return tuned_tables(found, evaluations, raced, best, run.backend, sessions)


def _result_cost(
    run: RunRecord,
    usage: Mapping[str, Usage],
    evaluations: Mapping[str, Evaluation],
    iterations: Sequence[IterationRecord],
    kernels: Sequence[KernelRecord],
) -> ResultCost:
    base, best = evaluations.get(run.baseline_hash), evaluations.get(run.best_hash)
    base_pct, best_pct = (e.pct_of_peak if e else None for e in (base, best))
    return result_cost(usage, base_pct, best_pct, iterations, kernels)


def _cut_off(store: Store, run: RunRecord) -> dict[str, Any]:
    """Paid calls a kill cut off before they were recorded: how many, and the most they cost
    (counted as spent: ``Store.hold_call``)."""
    spent = store.spent([run.id])
    return {"calls": spent.held_calls, "usd": spent.held_usd}


def run_show_json(store: Store, run: RunRecord) -> dict[str, Any]:
    """What `runs show --json` prints (and the HTTP API's /v1/runs/ID gives)."""
    records = store.kernels(run.id)
    kernels = {k.hash: k for k in records}
    evaluations = run_evaluations(store, run)
    iterations = store.iterations(run.id)
    base = _latency(evaluations, run.baseline_hash)
    payload = {
        **run_row(store, run),
        "backend": run.backend,
        "hardware": run.hardware,
        "config": run.spec,  # the RunSpec as recorded
        "iterations": [vars(i) | {"beam": list(i.beam)} for i in iterations],
        "lineage": [asdict(s) for s in lineage(kernels, evaluations, run.best_hash, base)],
        "usage": store.usage(run.id),
        "variants": [asdict(t) for t in variant_tables(store, run, records, evaluations)],
        "cost": asdict(
            _result_cost(run, store.usage_by_agent(run.id), evaluations, iterations, records)
        ),
        "cut_off": _cut_off(store, run),
    }
    found = generalization(store, run)
    if found.workloads.several:
        payload["generalization"] = found.as_json()
    return payload


# --- looking up what a request names --------------------------------------------------------------
# The same lookups as the command line's (``cli.common``), with the same errors.

MEASURING = "measuring this machine's ceilings once (accelopt hardware)"


def unknown_backend(backend: str, known: Sequence[str] | None = None) -> str:
    """The sentence for a backend not among ``known`` (default: those with ceilings of their
    own, ``registry.hardware_backends``: read when asked, so no command pays for other
    distributions' entry points at start-up)."""
    known = registry.hardware_backends() if known is None else known
    return f"unknown backend {backend!r}; the available backends are: {', '.join(known)}"


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def hardware_for(backend: str, announce: Callable[[str], None] | None = _to_stderr) -> HardwareSpec:
    """The ceilings kernels of ``backend`` are scored against: for cpu, this machine's, measured
    once and cached; for triton, the GPU's (see ``hardware.gpu_spec``). ``announce`` is told
    before the machine is measured (it takes a while); None: nothing is said."""
    found = registry.known(backend)
    if found is None or found.reference:  # a reference kind times the problem's own form
        raise UserError(unknown_backend(backend, registry.kernel_backends()))
    if found.runs is registry.Runs.GPU:
        from accelopt.hardware.gpu_spec import triton_spec

        return triton_spec()
    spec = load_cpu_spec(measure_if_missing=False)
    if spec is None:
        if announce is not None:
            announce(MEASURING)
        spec = ensure_cpu_spec()  # measures, unless another process did meanwhile
    return spec


INSTALL_HINTS = {
    "torch": "pip install 'accelopt[import]' (the CPU build of torch, and safetensors), or "
    "pip install torch --index-url https://download.pytorch.org/whl/cpu",
    "safetensors": "pip install 'accelopt[import]' or pip install safetensors",
}


def require_modules(problem: Problem) -> None:
    """A UserError naming what to install when a module the problem's reference imports is
    missing here (an imported PyTorch problem needs torch)."""
    for module in problem.requires:
        if importlib.util.find_spec(module) is None:
            hint = INSTALL_HINTS.get(module, f"pip install {module}")
            raise UserError(
                f"problem {problem.name}'s reference needs the Python module {module!r}, which "
                f"is not installed: {hint}"
            )


def problem_and_workload(
    name: str, workload: str, workspace: Path | None = None, evaluating: bool = True
) -> Problem:
    """The named problem (the suite's or the workspace's) with ``workload``; a UserError when
    the workload is unknown or, ``evaluating``, a module its reference needs is missing."""
    problem = load_problem(name, workspace)
    try:
        problem.workload(workload)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    if evaluating:
        require_modules(problem)
    return problem


def evaluation_json(evaluation: Evaluation, hardware: HardwareSpec | None = None) -> dict[str, Any]:
    """The evaluation's fields, and ``ceilings``: which ceiling each figure used. ``hardware``:
    the spec it was scored against, for the cached ceiling's figure (None without it, or when
    ``hardware`` is another spec than the evaluation's)."""
    data = evaluation.model_dump(mode="json")
    measured = {k: data.pop(k) for k in KernelMeasurement.model_fields}  # after the verdict
    return {**data, **measured, "ceilings": ceilings_json(evaluation, hardware)}


def ceilings_json(evaluation: Evaluation, hardware: HardwareSpec | None = None) -> dict[str, Any]:
    """What ``pct_of_peak`` is against (``used``: "calibrated" or "cached"), the cached ceiling
    that bounds the kernel (``Evaluation.cached`` and the verdict are against it) and
    the control timed with it (``control_rate``: what a calibrated figure is against)."""
    name = BOUND_CEILINGS[str(evaluation.bound)]
    calibrated_rate = evaluation.calibration.rate if evaluation.calibration else None
    same = hardware is not None and hardware.key() == evaluation.hardware
    value = getattr(hardware, name) if same else None
    return {
        "used": evaluation.ceiling,
        "cached": {"hardware": evaluation.hardware, "name": name, "value": value},
        "control": {"rate": calibrated_rate, "what": evaluation.control},
    }
