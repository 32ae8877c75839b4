"""The kernel the model path calls for a problem: the workspace's best run for it (one tuned at
the model's own sizes first), else the problem's shipped expert, else none. The kernel is
exported once per sizes into the workspace (``model/kernels/<problem>-<hash>-<sizes>``: built
for the model's sizes and checked there by an evaluation, as ``accelopt export`` checks it) and
loaded from there in the caller's process."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelopt import views
from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import DEFAULT_BACKEND, shipped_kernel
from accelopt.errors import UserError
from accelopt.export.bundle import Source, author_of, export_kernel, refusal
from accelopt.export.runtime import MANIFEST, ExportedKernel
from accelopt.problems import sizes as sizes_module
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig, harness_key
from accelopt.profiling.factory import make_profiler
from accelopt.search.workloads import run_workloads
from accelopt.store.database import DB_NAME
from accelopt.store.records import RunRecord
from accelopt.store.store import Store


@dataclass(frozen=True)
class Provided:
    kernel: Any  # ExportedKernel
    origin: str  # "run 3fa2c1d0e9ab" or "shipped expert"
    folder: Path


def sized_name(problem: Problem, sizes: dict[str, int]) -> str:
    """The workload name that spells these sizes (``M=256,N=1536,K=512``)."""
    return sizes_module.sized_name(problem.params, sizes)


def best_run(store: Store, problem: Problem, sizes: dict[str, int]) -> RunRecord | None:
    """The workspace's run whose best kernel to use: the latest that tuned at these sizes (its
    best may be the kernel it started from: that was confirmed there), else the latest whose
    best is not where it started (where the problem ships no kernel, any run's)."""
    runs = [
        r
        for r in store.list_runs()
        if r.problem == problem.name and r.backend == DEFAULT_BACKEND and r.best_hash
    ]
    wanted = sized_name(problem, sizes)
    runs.sort(
        key=lambda r: (
            wanted in run_workloads(r).tuned,
            r.best_hash != r.baseline_hash,
            r.updated_at,
        ),
        reverse=True,
    )
    shipped = shipped_kernel(problem, "expert").is_file()
    found = [
        r
        for r in runs
        if wanted in run_workloads(r).tuned or r.best_hash != r.baseline_hash or not shipped
    ]
    return found[0] if found else None


def kernel_for(
    problem: Problem, sizes: dict[str, int], workspace: Path | None, runs: bool = True
) -> Provided | None:
    """The kernel for ``problem`` at ``sizes``, exported and loaded; None where there is none.
    ``runs`` False: the shipped expert only (no kernel a run found, an LLM's, runs in the
    caller's process)."""
    source, origin = None, ""
    if runs and workspace is not None and (workspace / DB_NAME).exists():
        with Store.open_readonly(workspace) as store:
            run = best_run(store, problem, sizes)
            if run is not None:
                source, origin = store.kernel_source(run.best_hash), f"run {run.id}"
    if source is None:
        path = shipped_kernel(problem, "expert")
        if not path.is_file():
            return None
        source, origin = path.read_text(), "shipped expert"
    kernel = Kernel(source, DEFAULT_BACKEND, origin)
    root = workspace if workspace is not None else Path.cwd() / ".accelopt"
    workload = sized_name(problem, sizes)
    tag = "-".join(str(sizes[p]) for p in problem.params)
    folder = root / "model" / "kernels" / f"{problem.name}-{kernel.hash[:12]}-{tag}"
    if not (folder / MANIFEST).is_file():
        _export(problem, kernel, folder, workload)
    return Provided(ExportedKernel(folder), origin, folder)


def _export(problem: Problem, kernel: Kernel, folder: Path, workload: str) -> None:
    """Export ``kernel`` built for (and checked at) the model's sizes."""
    hardware = views.hardware_for(kernel.backend)  # says so on stderr when it measures (a minute)
    with make_profiler("local", hardware, EvalConfig(workers=1, check_only=True)) as profiler:
        evaluation = profiler.evaluate(kernel, problem, workload)
    reason = refusal(problem, {workload: evaluation})
    if reason:
        raise UserError(f"{problem.name}'s kernel ({kernel.name}) was not exported: {reason}")
    source = Source(
        kernel,
        harness_version=harness_key(problem.fingerprint),
        author=author_of(kernel.source, problem, kernel.backend),
    )
    export_kernel(problem, source, {workload: evaluation}, folder)
