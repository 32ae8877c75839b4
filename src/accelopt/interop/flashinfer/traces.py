"""An accelopt kernel as a FlashInfer Trace solution, and its evaluations as traces.

The schema has no C language (``python``, ``triton``, ``cpp``, ``cuda``, ``tilelang``): a C kernel
is written as ``cpp``, the closest, with its build and its calling convention in the description.
Statuses map to the schema's (it has no REJECTED or SUSPICIOUS); accelopt's own status, % of peak
and relative L2 error are in the log and in ``correctness.extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from accelopt import __version__
from accelopt.backends import registry
from accelopt.errors import UserError
from accelopt.problems.flashinfer.schema import Definition
from accelopt.problems.records import Problem

if TYPE_CHECKING:  # annotations only: no need to import profiling (slow) to write records
    from accelopt.backends.kernel import Kernel
    from accelopt.hardware.spec import HardwareSpec
    from accelopt.profiling.evaluation import Evaluation

AUTHOR = "accelopt"
C_FLAGS = "-O3 -march=native -fopenmp -shared -fPIC"  # -mcpu=native on aarch64

STATUS = {
    "PASSED": "PASSED",
    "COMPILE_ERROR": "COMPILE_ERROR",
    "REJECTED": "COMPILE_ERROR",  # refused by static checks before compiling: it was not built
    "CRASH": "RUNTIME_ERROR",
    "TIMEOUT": "TIMEOUT",
    "INCORRECT": "INCORRECT_NUMERICAL",
    "SUSPICIOUS": "RUNTIME_ERROR",  # faster than the roofline allows: not a result to rank
}


class ExportRefused(UserError):
    """A problem, kernel or evaluation that cannot be written as FlashInfer Trace."""


def solution_name(definition: Definition, kernel: Kernel) -> str:
    return f"{definition.name}_{AUTHOR}_{kernel.backend}_{kernel.hash[:8]}"


def solution(
    definition: Definition, problem: Problem, kernel: Kernel, hardware: HardwareSpec | None
) -> dict[str, Any]:
    found = registry.known(kernel.backend)
    named = found.flashinfer if found is not None else None
    if found is None or named is None:
        raise ExportRefused(f"kernels of backend {kernel.backend} have no FlashInfer language")
    language, path, dependencies = named.language, named.entry, list(named.dependencies)
    args = [*definition.inputs, *definition.outputs]
    if found.language is registry.Language.C:
        params = ", ".join(
            [f"const float *{n}" for n in definition.inputs]
            + [f"float *{n}" for n in definition.outputs]
        )
        defines = " ".join(f"-D{a}=<value>" for a in definition.axes)
        about = (
            f"accelopt C kernel '{kernel.name}' for {problem.name}. It is C11, not C++: the schema "
            "has no C language, so it is marked cpp, and it has no tvm-ffi or torch binding. "
            f"Build: cc {C_FLAGS} {defines} (-mcpu=native on aarch64; every axis is a "
            f"compile-time #define of the workload's value). Call: void kernel({params}) on "
            "contiguous row-major float32 buffers, outputs last (destination-passing)."
        )
    else:
        about = (
            f"accelopt {kernel.backend} kernel '{kernel.name}' for {problem.name}: the launcher "
            f"kernel({', '.join(args)}) takes contiguous float32 tensors, inputs then outputs "
            "(destination-passing), and reads the sizes from their shapes."
        )
    target = hardware.name if hardware is not None else kernel.backend
    return {
        "name": solution_name(definition, kernel),
        "definition": definition.name,
        "description": about,
        "author": AUTHOR,
        "spec": {
            "language": language,
            "target_hardware": [target],
            "entry_point": f"{path}::kernel",
            "dependencies": dependencies,
            "destination_passing_style": True,
        },
        "sources": [{"path": path, "content": kernel.source}],
    }


def check(
    problem: Problem, kernel: Kernel | None, evaluation: Evaluation, hardware: HardwareSpec | None
) -> None:
    if kernel is None:
        raise ExportRefused("traces need the kernel they measured: pass it as the solution")
    if evaluation.problem != problem.name:
        raise ExportRefused(
            f"an evaluation of problem {evaluation.problem} was given to export {problem.name}"
        )
    if evaluation.kernel_hash != kernel.hash:
        raise ExportRefused(
            f"the evaluation of kernel {evaluation.kernel} ({evaluation.kernel_hash}) is not of "
            f"the solution {kernel.name} ({kernel.hash}): export each kernel with its own"
        )
    if hardware is not None and evaluation.hardware != hardware.key():
        raise ExportRefused(
            f"the evaluation on workload {evaluation.workload} was measured on "
            f"{evaluation.hardware}, not on the hardware given ({hardware.key()})"
        )


def trace(
    definition: Definition,
    workloads: Mapping[str, dict[str, Any]],
    evaluation: Evaluation,
    hardware: HardwareSpec | None,
    name: str,
) -> dict[str, Any]:
    """The trace of one evaluation: the workload object as the dataset has it, the status mapped,
    latency in ms, accelopt's measures in the log."""
    if evaluation.workload not in workloads:
        raise ExportRefused(
            f"the evaluation's workload {evaluation.workload} is not one of "
            f"{definition.name}'s: export the problem it was measured on"
        )
    status = STATUS[str(evaluation.status)]
    correctness = None
    if status in ("PASSED", "INCORRECT_NUMERICAL"):
        correctness = {
            "max_relative_error": "NaN",  # element-wise errors are not measured (as flashinfer
            "max_absolute_error": "NaN",  # writes a NaN); accelopt's measure is in extra
            "extra": {
                "relative_l2_error": evaluation.max_rel_err,
                "tolerance": evaluation.tolerance,
                "seeds": list(evaluation.seeds),
            },
        }
    performance = None
    if status == "PASSED":
        performance = {
            "latency_ms": (evaluation.latency_s or 0.0) * 1e3,
            "reference_latency_ms": 0.0,  # not measured
            "speedup_factor": 0.0,
        }
    environment = {
        "hardware": hardware.name if hardware is not None else evaluation.hardware,
        "libs": {"accelopt": __version__},
    }
    return {
        "definition": definition.name,
        "workload": workloads[evaluation.workload],
        "solution": name,
        "evaluation": {
            "status": status,
            "log": log(evaluation, hardware),
            "correctness": correctness,
            "performance": performance,
            "environment": environment,
            "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    }


def log(e: Evaluation, hardware: HardwareSpec | None) -> str:
    lines = [
        f"accelopt {__version__}: kernel {e.kernel} ({e.backend}, {e.kernel_hash}) on workload "
        f"{e.workload}: {e.status}",
    ]
    if e.error:
        lines.append(f"error: {e.error}")
    if e.latency_s is not None:
        noise = f", noise {e.noise:.1%}" if e.noise is not None else ""
        lines.append(f"latency: {e.latency_s * 1e3:.6g} ms (median of {e.calls} calls{noise})")
    pct = f"{e.pct_of_peak:.1%} of peak" if e.pct_of_peak is not None else "% of peak unknown"
    lines.append(f"roofline: {e.peak_s * 1e3:.6g} ms, {e.bound}-bound; {pct}")
    if e.max_rel_err is not None:
        lines.append(f"relative L2 error: {e.max_rel_err:.3g} (tolerance {e.tolerance:.3g})")
    where = hardware.name if hardware is not None else e.hardware
    lines.append(f"hardware: {where} ({e.hardware}); reference latency and speedup not measured")
    lines.append("timestamp: when exported (accelopt records no time per evaluation)")
    if e.log:
        lines += ["--- kernel log ---", e.log]
    return "\n".join(lines)
