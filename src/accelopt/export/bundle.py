"""Write an export folder: a kernel that passed, as a library an application calls.

The folder holds the source, one object per exported workload, a C header, a Python module (and
the runtime it copies: ``runtime.py``), the standalone reference where there is one, a KernelBench
``model_new.py`` for an imported KernelBench problem, ``EVIDENCE.json`` and a README. It is
written beside its target and moved into place, so a failed export leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import json
import keyword
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from accelopt import __version__, templating
from accelopt.backends import registry
from accelopt.backends.base import BuildResult, get_backend
from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.export import kernelbench
from accelopt.export.reference import standalone_reference
from accelopt.export.runtime import MANIFEST
from accelopt.export.runtime_build import machine_fingerprint
from accelopt.problems.records import Problem
from accelopt.profiling.evaluation import Evaluation

HERE = Path(__file__).parent
RUNTIME_DIR = "_accelopt"  # runtime.py and the two files beside it, as in this package
RUNTIME_FILES = ("runtime.py", "runtime_build.py", "runtime_torch.py")
HEADER_NAME = "kernel.h"
BUILD_TIMEOUT_S = 300.0
# A kernel that defines or undefines the macro ``kernel`` itself would undo the export's rename.
_KERNEL_MACRO = re.compile(r"^[ \t]*#[ \t]*(?:define|undef)[ \t]+kernel\b", re.MULTILINE)
_templates = templating.environment("accelopt.export", kind="source")


@dataclass(frozen=True)
class Exported:
    """What an export wrote: the folder, its Python module's file, and its workloads."""

    folder: Path
    module: Path
    workloads: tuple[str, ...]
    reference: bool  # whether reference.py is there (new sizes can be verified)
    model_new: bool  # whether model_new.py is there (a KernelBench problem)


@dataclass(frozen=True)
class Source:
    """Where the exported kernel comes from: a run (its id), or a file or shipped kind."""

    kernel: Kernel
    run: str = ""
    hardware: str = ""  # HardwareSpec.key() of the evaluations
    harness_version: str = ""
    author: str = "llm"  # who wrote it: a key of AUTHORS

    @property
    def authored(self) -> str:
        """Who wrote the kernel, as the folder's README and module say it."""
        return AUTHORS[self.author]


# Who wrote an exported kernel: an LLM (a run's executor, fixer or agent), accelopt's developers
# (a shipped baseline or expert, tuned or not), or the user (a kernel file they gave).
AUTHORS = {
    "llm": "LLM-written code",
    "shipped": "a hand-written kernel shipped with accelopt",
    "user": "a kernel you gave accelopt",
}


def author_of(source: str, problem: Problem, backend: str, llm_wrote: bool = False) -> str:
    """``llm`` where an LLM wrote the kernel (or part of its lineage), ``shipped`` for one of the
    problem's shipped kernels (as written, or a tuned variant of one: ``source`` is then the
    kernel the variant was made of), else ``user``."""
    if llm_wrote:
        return "llm"
    shipped = [shipped_kernel(problem, kind, backend) for kind in ("baseline", "expert")]
    return "shipped" if any(p.is_file() and p.read_text() == source for p in shipped) else "user"


def c_symbol(problem: str, kernel_hash: str) -> str:
    """The C symbol of an export: ``<problem>_<first 12 of the kernel's hash>``, a C identifier
    (``matmul_ef639af5b277``), so that two exports link into one program. The kernel defines
    ``kernel`` (the contract); the export renames it when it compiles (``rename_prefix``)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", problem)
    return f"{'p' if name[:1].isdigit() else ''}{name}_{kernel_hash[:12]}"


def c_prototype(problem: Problem, symbol: str) -> str:
    """``void <symbol>(const float *x, float *y)``: inputs, then outputs."""
    args = [f"const float *{t.name}" for t in problem.inputs]
    args += [f"float *{t.name}" for t in problem.outputs]
    return f"void {symbol}({', '.join(args)})"


def rename_prefix(problem: Problem, symbol: str) -> str:
    """What the export puts before the kernel's source when it builds the objects: ``kernel``
    is a macro for ``symbol`` (as ``-Dkernel=<symbol>`` does for a build at new sizes), and the
    prototype, so that the kernel's definition is checked against the header's."""
    return f"#define kernel {symbol}\n{c_prototype(problem, symbol)};\n"


def refusal(problem: Problem, evaluations: Mapping[str, Evaluation | None]) -> str | None:
    """One sentence saying why this kernel may not be exported, or None: it must have PASSED
    on every exported workload."""
    for workload, evaluation in evaluations.items():
        if evaluation is None:
            return f"the kernel has no evaluation on {problem.name}/{workload}: evaluate it first"
        if evaluation.status != Status.PASSED:
            why = f" ({evaluation.error.splitlines()[0][:160]})" if evaluation.error else ""
            return (
                f"the kernel did not pass on {problem.name}/{workload}: it is "
                f"{evaluation.status.value}{why}; only a kernel that passed on every exported "
                "workload is exported"
            )
    return None


def export_kernel(
    problem: Problem, source: Source, evaluations: Mapping[str, Evaluation], to: Path
) -> Exported:
    """Write the export of ``source`` for ``problem`` on the workloads of ``evaluations`` (all
    PASSED: see ``refusal``) into ``to``, replacing an earlier export there."""
    reason = refusal(problem, evaluations)
    if reason:
        raise UserError(reason)
    _check_target(to)
    try:
        to.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{to.name}-", dir=to.parent))
    except OSError as exc:
        raise UserError(
            f"cannot write beside {to} ({exc.strerror or exc}): give --to a folder you can write"
        ) from None
    try:
        exported = _write(problem, source, evaluations, stage)
        umask = os.umask(0)
        os.umask(umask)
        stage.chmod(0o777 & ~umask)  # mkdtemp made it 0700
        _replace(stage, to)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return Exported(
        to, to / exported.module.name, exported.workloads, exported.reference, exported.model_new
    )


def _check_target(to: Path) -> None:
    if to.exists() and not to.is_dir():
        raise UserError(f"{to} is a file: give --to a folder")
    if to.is_dir() and any(to.iterdir()) and not (to / MANIFEST).is_file():
        raise UserError(
            f"{to} is a folder that holds something other than an accelopt export: give --to a "
            "new or empty folder"
        )


def _replace(stage: Path, to: Path) -> None:
    old = None
    if to.exists():
        old = to.with_name(f".{to.name}.old-{os.getpid()}")
        os.replace(to, old)
    os.replace(stage, to)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _write(
    problem: Problem, source: Source, evaluations: Mapping[str, Evaluation], folder: Path
) -> Exported:
    kernel = source.kernel
    backend = kernel.backend
    found = registry.record(backend)
    if not found.exported:
        exportable = ", ".join(n for n, r in registry.records().items() if r.exported)
        raise UserError(f"the {backend} backend's kernels are not exported: use {exportable}")
    refused = get_backend(backend).check(kernel.source)  # today's checks, not its evaluation's
    if refused:
        raise UserError(f"the kernel is not exported: its source is refused ({refused})")
    source_name = found.exported
    (folder / source_name).write_text(kernel.source, encoding="utf-8")
    if found.language is registry.Language.C and _KERNEL_MACRO.search(kernel.source):
        raise UserError(
            "the kernel is not exported: it defines or undefines a macro named kernel, which "
            "the export needs for its C symbol (rename that macro)"
        )
    variants = [_variant(problem, kernel, w, folder) for w in evaluations]
    reference = standalone_reference(problem)
    if reference is not None:
        (folder / "reference.py").write_text(reference, encoding="utf-8")
    manifest = _manifest(problem, source, source_name, variants, reference is not None)
    _dump(folder / MANIFEST, manifest)
    _dump(folder / "EVIDENCE.json", evidence(problem, source, evaluations))
    (folder / RUNTIME_DIR).mkdir()
    for name in RUNTIME_FILES:
        shutil.copyfile(HERE / name, folder / RUNTIME_DIR / name)
    context = _context(problem, source, manifest, evaluations)
    (folder / HEADER_NAME).write_text(_templates.get_template("kernel.h.jinja").render(context))
    module = folder / f"{problem.name}_kernel.py"
    module.write_text(_templates.get_template("module.py.jinja").render(context))
    (folder / "__init__.py").write_text(
        f'"""accelopt export of {problem.name}: see README.md."""\n\n'
        f"from .{module.stem} import *  # noqa: F403\n"
        f"from .{module.stem} import __all__  # noqa: F401\n"
    )
    model_new = kernelbench.model_new(problem, module.stem, source.authored)
    if model_new is not None:
        (folder / "model_new.py").write_text(model_new, encoding="utf-8")
        (folder / "model.py").write_text(kernelbench.model_source(problem), encoding="utf-8")
    readme = _templates.get_template("README.md.jinja").render(
        **context, model_new=model_new is not None, has_reference=reference is not None
    )
    (folder / "README.md").write_text(readme)
    return Exported(
        folder, module, tuple(evaluations), reference is not None, model_new is not None
    )


def _variant(problem: Problem, kernel: Kernel, workload: str, folder: Path) -> dict[str, Any]:
    sizes = {p: int(problem.workload(workload).sizes[p]) for p in problem.params}
    found: dict[str, Any] = {"workload": workload, "sizes": sizes, "object": ""}
    if not registry.record(kernel.backend).builds_per_workload:
        return found  # compiled at its first launch, for any sizes (Triton)
    symbol = c_symbol(problem.name, kernel.hash)
    renamed = Kernel(rename_prefix(problem, symbol) + kernel.source, kernel.backend, kernel.name)
    built = _build(problem, renamed, sizes)
    if not built.ok or built.artifact is None:
        failed = _build(problem, kernel, sizes)  # as written: its own line numbers
        why = built if failed.ok else failed
        named = f" as {symbol} (kernel renamed)" if failed.ok else ""
        raise UserError(
            f"the kernel no longer builds{named} for {problem.name}/{workload} "
            f"({why.status.value if why.status else 'no object'}): {why.error[:200]}"
        )
    target = folder / "build" / f"{workload}.so"
    target.parent.mkdir(exist_ok=True)
    shutil.copyfile(built.artifact, target)
    target.chmod(0o755)
    return {**found, "object": f"build/{workload}.so"}


def _build(problem: Problem, kernel: Kernel, sizes: Mapping[str, int]) -> BuildResult:
    """The cpu backend's build of ``kernel`` (its checks, flags, cache-size macros and limits:
    the object the evaluation ran, but for its name), in a scratch directory."""
    with (
        tempfile.TemporaryDirectory(prefix="accelopt-export-") as scratch,
        contextlib.chdir(scratch),
    ):
        return get_backend(kernel.backend).build(kernel, problem, dict(sizes), BUILD_TIMEOUT_S)


def _manifest(
    problem: Problem,
    source: Source,
    source_name: str,
    variants: Sequence[dict[str, Any]],
    has_reference: bool,
) -> dict[str, Any]:
    kernel = source.kernel
    recipe = get_backend(kernel.backend).export_recipe()
    return {
        "format": 2,
        "problem": problem.name,
        "description": problem.description,
        "backend": kernel.backend,
        "loader": registry.record(kernel.backend).loader,  # how runtime.py loads the kernel
        "kernel_hash": kernel.hash,
        **problem.interface(),
        "source": source_name,
        "author": source.author,
        "header": HEADER_NAME,
        "symbol": c_symbol(problem.name, kernel.hash),  # the C name of the kernel: kernel.h
        "build": recipe,
        "machine": machine_fingerprint(),
        "variants": list(variants),
        "reference": has_reference,
        "default_policy": "compile" if has_reference else "raise",
    }


def evidence(
    problem: Problem, source: Source, evaluations: Mapping[str, Evaluation]
) -> dict[str, Any]:
    """What the kernel measured, per workload: ``EVIDENCE.json``."""
    return {
        "kernel_hash": source.kernel.hash,
        "backend": source.kernel.backend,
        "problem": problem.name,
        "problem_version": problem.fingerprint,
        "run": source.run or None,
        "kernel": source.kernel.name,
        "author": source.author,
        "hardware": source.hardware or next(iter(evaluations.values())).hardware,
        "harness_version": source.harness_version,
        "accelopt_version": __version__,
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "workloads": {w: _figures(problem, w, e) for w, e in evaluations.items()},
    }


def _figures(problem: Problem, workload: str, e: Evaluation) -> dict[str, Any]:
    """A workload's evidence; a disturbed measurement gives none (``Evaluation.disturbed``)."""
    timed = not e.disturbed
    return {
        "sizes": dict(problem.workload(workload).sizes),
        "status": e.status.value,
        "disturbed": e.disturbed,
        "latency_s": e.latency_s if timed else None,
        "latency_ci_s": [e.ci_low_s, e.ci_high_s] if timed else [None, None],
        "pct_of_peak": e.pct_of_peak if timed else None,
        "pct_of_peak_ci": [e.pct_low, e.pct_high] if timed else [None, None],
        "ceiling": e.ceiling,
        "bound": e.bound.value if hasattr(e.bound, "value") else str(e.bound),
        "peak_s": e.peak_s,
        "max_rel_err": e.max_rel_err,
        "tolerance": e.tolerance,
        "seeds": list(e.seeds),
        "threads": e.threads,
        "hardware": e.hardware,
    }


def _context(
    problem: Problem,
    source: Source,
    manifest: Mapping[str, Any],
    evaluations: Mapping[str, Evaluation],
) -> dict[str, Any]:
    function = problem.name + "_" if keyword.iskeyword(problem.name) else problem.name
    figures = {
        w: (
            f"{e.latency_s * 1e3:.3g} ms"
            if e.latency_s and not e.disturbed
            else ("not timed: the machine was too busy" if e.disturbed else "untimed"),
            f"{e.pct_of_peak * 100:.1f} %" if e.pct_of_peak and not e.disturbed else "",
        )
        for w, e in evaluations.items()
    }
    return {
        "problem": problem,
        "function": function,
        "manifest": manifest,
        "source": source,
        "figures": figures,
        "args": [t.name for t in problem.inputs],
        "outs": [t.name for t in problem.outputs],
        "upper": problem.name.upper(),
        "symbol": manifest["symbol"],
        "prototype": c_prototype(problem, manifest["symbol"]),
        "c_flags": " ".join(_caller_flags(manifest.get("build") or {})),
    }


def _caller_flags(recipe: Mapping[str, Any]) -> list[str]:
    """The flags a C caller compiles kernel.c with into an object of its own program."""
    linking = ("-shared", "-fPIC", "-nostartfiles")
    flags = [f for f in recipe.get("flags", []) if f not in linking and not f.startswith("-Wl,")]
    return [flags[0], "-march=native", *flags[1:]] if flags else []


def _dump(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
