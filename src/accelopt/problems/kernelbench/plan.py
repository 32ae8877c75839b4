"""Decide what an imported KernelBench problem is: its default workload ``cpu`` (the file's
sizes after ``--set``, halved by ``--fit`` when too big), the workload ``source`` (the file's own
sizes), the kernel arguments and their shapes in size parameters, and the counted costs. The
result is the content of ``import.json``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from accelopt.problems.kernelbench.analysis import (
    MetaFailed,
    RealCheck,
    Run,
    Shape,
    real_check,
    run_on,
)
from accelopt.problems.kernelbench.costs import (
    Counts,
    available_memory,
    cost_notes,
    optimistic_seconds,
    reference_bytes,
)
from accelopt.problems.kernelbench.shapes import Argument, Probe, name_arguments, name_axes
from accelopt.problems.kernelbench.source import (
    ImportRefused,
    Source,
    execute,
    first_sentence,
    integer_constants,
    is_c_name,
)

TOLERANCE = 1e-4
# The default workload, without --fit: an evaluation prepares inputs and float64 references
# for 5 seeds and keeps them in the reference caches (1 GiB in memory, 4 GiB on disk), and a
# search evaluates hundreds of kernels; past these, every evaluation would wait on the reference.
LIMIT_ARGS, LIMIT_SECONDS = 256 << 20, 5.0
FIT_ARGS, FIT_SECONDS = 64 << 20, 2.0  # what --fit halves the sizes down to


def size_text(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def _meta(source: Source, overrides: Mapping[str, int]) -> Run | str:
    try:
        return run_on(source, overrides, "meta")
    except MetaFailed as exc:
        return str(exc)


def _prober(source: Source, overrides: Mapping[str, int], base: Run) -> Probe:
    """Shape inference on the meta device with one constant of ``base`` doubled (or plus one):
    the argument shapes, cut after the parameters when forward fails or gives other outputs."""
    lead = len(base.inputs) + len(base.groups)

    def probe(c: str) -> tuple[int, list[tuple[int, ...]]] | None:
        v = base.constants[c]
        for new in (2 * v, v + 1):
            if new == v or new <= 0:
                continue
            try:
                run = run_on(source, {**overrides, c: new}, "meta", count=False)
            except (ImportRefused, MetaFailed):
                continue
            if len(run.inputs) + len(run.groups) != lead:
                continue
            same_outputs = run.outputs is not None and len(run.shapes) == len(base.shapes)
            return new, run.shapes if same_outputs else run.shapes[:lead]
        return None

    return probe


def _sizing(source: Source, overrides: Mapping[str, int], run: Run) -> list[str]:
    """The constants that size an argument of ``run``, in file order."""
    args, _ = name_arguments(run, run.constants)
    order = list(run.constants)
    probe = _prober(source, overrides, run)
    shapes, _, _ = name_axes(args, {"w": run.shapes}, {"w": run.constants}, order, probe)
    return [c for c in order if any(c in s for s in shapes)]


def _too_big(run: Run, max_args: int, max_seconds: float, slowdown: float = 1.0) -> str | None:
    """Why ``run`` is too big, or None. ``slowdown``: this machine's float64 forward time over
    the optimistic estimate, once measured (--fit predicts with it before measuring again)."""
    args = run.args_bytes32
    if args > max_args:
        return f"its arguments take {size_text(args)} in float32, over {size_text(max_args)}"
    need, free = reference_bytes(run.counts, args), available_memory()
    if need > free / 2:
        return (
            f"its float64 reference needs about {size_text(need)}, over half of this "
            f"machine's free memory ({size_text(free)})"
        )
    if run.counts is not None and run.outputs is not None:
        seconds = optimistic_seconds(run.counts, args) * slowdown
        if seconds > max_seconds:
            least = "at least" if slowdown == 1.0 else "about"
            return f"its float64 forward takes {least} {seconds:.1f} s, over {max_seconds:g} s"
    return None


def _halve(
    source: Source, overrides: Mapping[str, int], run: Run, reason: str, sizing: list[str]
) -> tuple[dict[str, int], str]:
    for c in sorted(sizing, key=lambda c: -run.constants[c]):
        v = run.constants[c]
        if v < 2:
            continue
        new = {**overrides, c: v // 2}
        try:
            halved = run_on(source, new, "meta", count=False)
        except MetaFailed:
            halved = None  # the meta device cannot tell; the real run will
        except ImportRefused:
            continue  # the file fails with this size: try the next constant
        if halved is not None and halved.outputs is None and run.outputs is not None:
            continue  # forward fails with this size
        return new, c
    if not sizing:
        why = "no integer constant of the file sizes its arguments: edit its sizes"
    else:
        why = f"halving {', '.join(sizing)} makes it fail, or they cannot be halved"
    raise ImportRefused(f"--fit cannot make {source.filename} fit this machine ({reason}): {why}")


def settle(
    source: Source, sets: Mapping[str, int], fit: bool
) -> tuple[dict[str, int], RealCheck, Run | None, dict[str, tuple[int, int]]]:
    """The overrides of the default workload, its real check, its meta run (None when the meta
    device cannot run it) and what --fit changed (constant -> (before, after))."""
    overrides, fitted = dict(sets), {}
    sizing: list[str] | None = None  # the constants that size an argument, found once
    max_args, max_seconds = LIMIT_ARGS, LIMIT_SECONDS
    slowdown = 1.0
    while True:
        meta = _meta(source, overrides)
        run = meta if isinstance(meta, Run) else None
        reason = _too_big(run, max_args, max_seconds, slowdown) if run is not None else None
        if reason is None:
            counted = run is not None and run.outputs is not None
            check = real_check(source, overrides, count=not counted, time_limit=max_seconds)
            if check.seconds <= max_seconds:
                return overrides, check, run, fitted
            reason = f"its float64 forward takes {check.seconds:.1f} s, over {max_seconds:g} s"
            if run is not None and run.counts is not None and run.outputs is not None:
                # the next sizes are predicted at this measured pace, with a margin
                estimate = optimistic_seconds(run.counts, run.args_bytes32)
                if estimate > 0:
                    slowdown = max(slowdown, 1.25 * check.seconds / estimate)
            run = run or check.run
        assert run is not None
        if sizing is None:
            sizing = _sizing(source, overrides, run)
        if not fit:
            values = ", ".join(f"{c}={run.constants[c]}" for c in sizing)
            hint = (
                f"set smaller values with --set for the constants that size its arguments "
                f"(now {values}), or pass --fit to halve them until it fits"
                if sizing
                else "no integer constant of the file sizes its arguments: edit its sizes"
            )
            raise ImportRefused(
                f"the default workload of {source.filename} is too big for this machine "
                f"({reason}): {hint}"
            )
        max_args, max_seconds = FIT_ARGS, FIT_SECONDS
        overrides, c = _halve(source, overrides, run, reason, sizing)
        fitted[c] = (fitted.get(c, (run.constants[c], 0))[0], overrides[c])


def _source_run(source: Source, notes: list[str]) -> tuple[Run, Counts] | None:
    """The file's own sizes, counted on the meta device, or on real tensors when they fit."""
    partial: Run | None = None
    try:
        run = run_on(source, {}, "meta")
        if run.outputs is not None and run.counts is not None:
            return run, run.counts
        partial, error = run, run.error
    except MetaFailed as exc:
        error = str(exc)
    except ImportRefused as exc:
        notes.append(f"workload source (the file's own sizes) is left out: {exc.reason}")
        return None
    if partial is not None and _too_big(partial, LIMIT_ARGS, LIMIT_SECONDS) is None:
        try:
            real = run_on(source, {}, None)
        except ImportRefused as exc:
            error = exc.reason
        else:
            assert real.counts is not None
            notes.append(f"costs of workload source were counted on real tensors: {error}")
            return real, real.counts
    why = "it is too big to count on real tensors" if partial else "its size is unknown"
    notes.append(f"workload source (the file's own sizes) is left out: {error}, and {why}")
    return None


def plan_import(source: Source, sets: Mapping[str, int], fit: bool) -> tuple[dict[str, Any], list]:
    """The content of import.json (less format, name, torch and date), and notes for the user."""
    ns = execute(source, {})
    constants = integer_constants(source, ns)
    _check_constants(source, sets, constants)
    overrides, check, meta, fitted = settle(source, sets, fit)
    cpu = check.run
    lost = [c for c in constants if c not in cpu.constants]
    if lost:
        raise ImportRefused(f"with the --set values, {', '.join(lost)} are no longer integers")
    notes: list[str] = []
    cpu_counts = _cpu_counts(meta, cpu, notes)
    notes += _check_notes(check, fitted)
    runs = _workload_runs(source, constants, (cpu, cpu_counts), notes)
    order = list(constants)
    args, rename_notes = name_arguments(cpu, order)
    notes += _zero_output_notes(args, check.zero_outputs)
    dims = {w: r.shapes for w, (r, _) in runs.items()}
    sizes = {w: {c: r.constants[c] for c in order} for w, (r, _) in runs.items()}
    probe = _prober(source, overrides, cpu)
    shapes, derived, axis_notes = name_axes(args, dims, sizes, order, probe)
    notes += rename_notes + axis_notes
    sentence = first_sentence(getattr(ns["Model"], "__doc__", None))
    payload = {
        "file": source.filename,
        "description": f"KernelBench {source.filename}: {sentence or 'its Model has no docstring'}",
        "constants": constants,
        "sets": dict(sets),
        "fitted": {c: list(v) for c, v in fitted.items()},
        "params": [*order, *derived],
        "workloads": _workloads(runs, sizes, derived),
        "arguments": _arguments(args, shapes, dims),
        "cost_notes": cost_notes(cpu_counts),
        "tolerance": TOLERANCE,
        "reference_seconds": round(check.seconds, 4),
        "fp32_error": check.fp32_error,
    }
    return payload, notes


def _check_constants(source: Source, sets: Mapping[str, int], constants: dict[str, int]) -> None:
    """Refuse a --set of no integer constant, and a constant that cannot be a size parameter."""
    for k in sets:
        if k not in constants:
            known = ", ".join(constants) or "none"
            raise ImportRefused(
                f"--set {k}: {source.filename} has no integer constant {k} (its constants: {known})"
            )
    for c in constants:
        if not is_c_name(c):
            raise ImportRefused(
                f"constant {c} of {source.filename} cannot be a size parameter: C kernels get it "
                f"as `#define {c} {constants[c]}`, and {c} is a C keyword, a name C kernels use or "
                "not a C identifier; rename it in the file"
            )


def _cpu_counts(meta: Run | None, cpu: Run, notes: list[str]) -> Counts:
    """The costs of the default workload: counted on the meta device, else on real tensors."""
    if meta is not None and meta.outputs is not None and meta.counts is not None:
        return meta.counts
    assert cpu.counts is not None
    why = meta.error if meta is not None else "the meta device cannot build it"
    notes.append(f"costs of workload cpu were counted on real tensors: {why}")
    return cpu.counts


def _check_notes(check: RealCheck, fitted: Mapping[str, tuple[int, int]]) -> list[str]:
    """What the user should know of the default workload: what --fit changed, and a float32
    forward of PyTorch's own already over the tolerance."""
    notes = []
    if fitted:
        changes = ", ".join(f"{c} from {a} to {b}" for c, (a, b) in fitted.items())
        notes.append(
            f"--fit halved {changes}, so that the default workload fits this machine "
            f"(arguments {size_text(check.run.args_bytes32)} in float32, float64 forward "
            f"{check.seconds:.2f} s)"
        )
    if check.fp32_error > TOLERANCE:
        notes.append(
            f"PyTorch's own float32 forward is {check.fp32_error:.1e} off the float64 reference "
            f"(relative L2), over the tolerance {TOLERANCE:g}: raise tolerance= in problem.py"
        )
    return notes


def _workload_runs(
    source: Source, constants: Mapping[str, int], cpu: tuple[Run, Counts], notes: list[str]
) -> dict[str, tuple[Run, Counts]]:
    """The run and costs of each workload: ``source`` (the file's own sizes) where it can be
    one, then ``cpu`` (the default)."""
    runs: dict[str, tuple[Run, Counts]] = {}
    if all(constants[c] == cpu[0].constants[c] for c in constants):
        runs["source"] = cpu
    elif (found := _source_run(source, notes)) is not None:
        src, default = found[0], cpu[0]
        n_in = len(default.inputs) + len(default.groups)
        if src.structure() != default.structure():
            notes.append(
                "workload source (the file's own sizes) is left out: it gives other arguments "
                "(another number of tensors, ranks or parameters) than the default workload"
            )
        elif src.shapes[:n_in] == default.shapes[:n_in]:
            notes.append(
                "workload source is left out: its inputs have the shapes of the default "
                "workload's, and the reference recognizes a workload by its input shapes"
            )
        else:
            runs["source"] = found
    runs["cpu"] = cpu
    return runs


def _zero_output_notes(args: list[Argument], zero_outputs: Iterable[int]) -> list[str]:
    outputs = [a for a in args if a.role == "output"]
    return [
        f"output {outputs[i].name!r} is all zeros on the default workload: a kernel that "
        "writes zeros passes"
        for i in zero_outputs
    ]


def _workloads(
    runs: Mapping[str, tuple[Run, Counts]],
    sizes: Mapping[str, dict[str, int]],
    derived: Mapping[str, Mapping[str, int]],
) -> dict[str, dict[str, Any]]:
    """import.json's workloads: the file's constants, the sizes (derived ones too), the costs."""
    return {
        w: {
            "constants": sizes[w],
            "sizes": {**sizes[w], **{d: v[w] for d, v in derived.items()}},
            "costs": {
                "matmul_flops": counts.matmul_flops,
                "vector_flops": counts.vector_flops,
                "bytes": float(run.args_bytes32),
            },
        }
        for w, (run, counts) in runs.items()
    }


def _arguments(
    args: list[Argument], shapes: Sequence[Sequence[str]], dims: Mapping[str, list[Shape]]
) -> list[dict[str, Any]]:
    """import.json's arguments: name, role, shape in size parameters, origin, state keys and
    each workload's dimensions."""
    arguments = []
    for i, (arg, shape) in enumerate(zip(args, shapes, strict=True)):
        entry = {"name": arg.name, "role": arg.role, "shape": list(shape), "origin": arg.origin}
        if arg.keys:
            entry["keys"] = list(arg.keys)
        entry["dims"] = {w: list(d[i]) for w, d in dims.items()}
        arguments.append(entry)
    return arguments
