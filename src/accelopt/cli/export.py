"""``accelopt export``: a kernel that passed, as a folder an application calls (Python, PyTorch,
C). The kernel is a run's best (``--run``) or a file or shipped kind (``--kernel``); its
evaluation on each exported workload is the run's, else one made now."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated

import typer

from accelopt import views
from accelopt.backends.kernel import Kernel
from accelopt.cli import common
from accelopt.cli import variants as variants_cli
from accelopt.cli.output import console
from accelopt.errors import UserError
from accelopt.export.bundle import Exported, Source, author_of, export_kernel, refusal
from accelopt.export.runtime import MANIFEST
from accelopt.formatting import milliseconds, percent
from accelopt.problems.loader import load_problem
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig, harness_key
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.factory import make_profiler
from accelopt.search.evaluations import run_evaluations
from accelopt.search.headline import stored_headline
from accelopt.search.spec import RunSpec
from accelopt.search.workloads import run_workloads, workload_name
from accelopt.store.records import KernelOrigin, KernelRecord
from accelopt.store.store import Store


def export_command(
    problem: Annotated[str, typer.Argument(help="problem name (see `accelopt bench list`)")],
    to: Annotated[Path, typer.Option("--to", help="the folder to write (made, or replaced)")],
    run: Annotated[str | None, typer.Option(help="export this run's best kernel")] = None,
    kernel: Annotated[
        Path | None,
        typer.Option(help="export this kernel file, or the problem's shipped baseline or expert"),
    ] = None,
    workload: Annotated[
        list[str] | None,
        typer.Option(
            help="a workload to build and check it for, by name or sizes such as "
            "M=512,N=768,K=384 (repeat; default: the run's, else cpu)"
        ),
    ] = None,
    backend: Annotated[str, typer.Option(help="the --kernel's backend: cpu or triton")] = "cpu",
    workspace: common.WorkspaceOption = None,
) -> None:
    """Write a kernel that passed as a library: source, objects, C header, Python module,
    EVIDENCE.json. A kernel that did not pass on every exported workload is refused."""
    if (run is None) == (kernel is None):
        raise UserError(
            "give the kernel to export: --run RUN (its best) or --kernel FILE|baseline|expert"
        )
    exported = (
        export_run(problem, run, to, workload, workspace)
        if run is not None
        else export_file(problem, kernel, to, workload, backend, workspace)  # type: ignore[arg-type]
    )
    show(exported)


def export_run(
    name: str, run_id: str, to: Path, workloads: Sequence[str] | None, workspace: Path | None
) -> Exported:
    """Export run ``run_id``'s best kernel, with the run's evaluations as evidence: those of its
    closing session (the figures the run reports), else the search's; a workload the run never
    measured it on is evaluated now."""
    with Store.open(common.workspace_dir(workspace)) as store:
        run = common.find_run(store, run_id)
        if run.problem != name:
            raise UserError(f"run {run.id} optimized {run.problem}, not {name}: give {run.problem}")
        source = store.kernel_source(run.best_hash) if run.best_hash else None
        if source is None:
            raise UserError(f"run {run.id} has no best kernel yet: resume it or pick another run")
        problem, chosen = _problem(name, workloads or run_workloads(run).tuned, workspace)
        version = harness_key(RunSpec.of(run).problem_version)
        lineage = _lineage(store.kernels(run.id), run.best_hash)
        session = stored_headline(store, run, run_workloads(run).tuned)  # the run's headline
        closing = session.best_by_workload if session is not None and session.best.passed else {}
        found = {
            w: closing.get(w) or run_evaluations(store, run, workload=w).get(run.best_hash)
            for w in chosen
        }
    kernel = Kernel(source, run.backend, f"run {run.id}")
    if run.backend == "cpu" and not _measured_here(run.hardware):
        found = dict.fromkeys(chosen)  # the objects are built here: so is the evidence
    missing = [w for w, e in found.items() if e is None]
    measured = _evaluate(problem, kernel, missing) if missing else {}
    evaluations = {w: found[w] or measured.get(w) for w in chosen}
    llm_wrote = any(k.origin in LLM_ORIGINS for k in lineage)
    author = author_of(lineage[-1].source if lineage else source, problem, run.backend, llm_wrote)
    return _export(
        problem,
        Source(kernel, run=run.id, hardware=run.hardware, harness_version=version, author=author),
        evaluations,
        to,
    )


LLM_ORIGINS = frozenset({KernelOrigin.EXECUTOR, KernelOrigin.FIXER, KernelOrigin.AGENT})


def _lineage(kernels: Sequence[KernelRecord], best: str) -> list[KernelRecord]:
    """The best kernel and its ancestors, back to the run's first kernel (last)."""
    by_hash = {k.hash: k for k in kernels}
    found: list[KernelRecord] = []
    while best in by_hash and by_hash[best] not in found:
        found.append(by_hash[best])
        best = by_hash[best].parent_hash
    return found


def _measured_here(hardware_key: str) -> bool:
    """Whether a run's evaluations were made on this machine's CPU (its spec's name; the digest
    after it changes when a ceiling is re-measured)."""
    return hardware_key.rsplit("-", 1)[0] == common.hardware_for("cpu", announce=False).name


def export_file(
    name: str,
    kernel_path: Path,
    to: Path,
    workloads: Sequence[str] | None,
    backend: str,
    workspace: Path | None,
) -> Exported:
    """Export a kernel file (or a shipped kind), evaluated now on each workload."""
    known = load_problem(name, workspace).workloads
    named = list(workloads or ["cpu" if "cpu" in known else next(iter(known))])
    problem, chosen = _problem(name, named, workspace)  # loads it once more, checking modules
    source = variants_cli.start_source(problem, kernel_path, backend)
    assert source is not None
    kernel = Kernel(source, backend, kernel_path.name)
    evaluations = _evaluate(problem, kernel, chosen)
    author = author_of(source, problem, backend)
    return _export(
        problem,
        Source(kernel, harness_version=harness_key(problem.fingerprint), author=author),
        evaluations,
        to,
    )


def _problem(
    name: str, workloads: Sequence[str], workspace: Path | None
) -> tuple[Problem, list[str]]:
    """The problem and the workloads' canonical names (one given by its sizes, in any order,
    is named in the problem's order), with a UserError for a workload it does not have."""
    problem = views.problem_and_workload(name, workloads[0], workspace)
    return problem, [workload_name(problem, w) for w in workloads]


def _evaluate(problem: Problem, kernel: Kernel, workloads: Sequence[str]) -> dict[str, Evaluation]:
    hardware = common.hardware_for(kernel.backend)
    found: dict[str, Evaluation] = {}
    with make_profiler("local", hardware, EvalConfig(workers=1)) as profiler:
        for w in workloads:
            found[w] = profiler.evaluate(kernel, problem, w)
            if refusal(problem, {w: found[w]}):
                break  # one failure refuses the export: the other workloads need not run
    return found


def _export(
    problem: Problem, source: Source, evaluations: Mapping[str, Evaluation | None], to: Path
) -> Exported:
    reason = refusal(problem, evaluations)
    if reason:
        raise UserError(f"not exported: {reason}")
    return export_kernel(problem, source, {w: e for w, e in evaluations.items() if e}, to)


def show(exported: Exported) -> None:
    """What was exported, where, and how to call it (paths and names printed verbatim)."""
    console.print(f"exported to {exported.folder}", highlight=False, markup=False)
    evidence = (exported.folder / "EVIDENCE.json").read_text()
    for workload, figures in json.loads(evidence)["workloads"].items():
        console.print(
            f"  {workload}: {figures['status']}, {milliseconds(figures['latency_s'])} ms, "
            f"{percent(figures['pct_of_peak'])} of peak",
            highlight=False,
        )
    module = exported.module.stem
    console.print(
        f"Python: sys.path.insert(0, {str(exported.folder)!r}); from {module} import "
        f"{module.removesuffix('_kernel')}   (or accelopt.load(DIR))",
        highlight=False,
        markup=False,
    )
    manifest = json.loads((exported.folder / MANIFEST).read_text())
    if manifest.get("backend") == "cpu" and manifest.get("symbol"):
        console.print(f"C: {manifest['symbol']}() in kernel.h (see its README.md)", highlight=False)
    if not exported.reference:
        console.print(
            "note: no standalone reference was exported, so calls at new sizes cannot be "
            "verified (the module's default policy for them is 'raise')",
            highlight=False,
        )
