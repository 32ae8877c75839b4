"""What the import checks and counts: the definition against the kernel contract, run()'s costs
on the meta device, and one float64 run of the reference."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from accelopt.problems import workspace
from accelopt.problems.flashinfer.imported import output_tensors, torch_module
from accelopt.problems.flashinfer.schema import Definition
from accelopt.problems.kernelbench.costs import BYTES_NOTE, cost_notes, count_forward
from accelopt.problems.kernelbench.source import (
    ImportRefused,
    gpu_refusal,
    is_c_name,
    mentions_gpu,
    short_error,
)
from accelopt.problems.records import Problem, TensorSpec

CHECK_BYTES = 64 << 20  # real tensors up to this when the meta device cannot run the reference
NOT_TORCH = (
    "{term}: run() calls no torch operator that counts (NumPy, say), so accelopt counts nothing: "
    "set {term}=lambda s: ... in problem.py"
)


class Uncountable(Exception):
    """run() cannot be counted for one workload's sizes (it needs data, and they are too big)."""


def check_definition(d: Definition) -> None:
    """Refuse what the kernel contract cannot express: scalars, dtypes other than float32,
    names that cannot be C #defines or C parameters."""
    tensors = [("input", n, s) for n, s in d.inputs.items()]
    tensors += [("output", n, s) for n, s in d.outputs.items()]
    for role, n, spec in tensors:
        if spec.shape is None:
            raise ImportRefused(
                f"definition {d.name} has a scalar {role} {n} (shape null): scalar {role}s the "
                "contract cannot pass yet (its arguments are float32 tensors)"
            )
        if spec.dtype != "float32":
            raise ImportRefused(
                f"definition {d.name} has {role} {n} of dtype {spec.dtype}: accelopt problems "
                "are float32 only"
            )
    for axis in d.axes:
        if not is_c_name(axis):
            raise ImportRefused(
                f"axis {axis!r} of definition {d.name} cannot be a C #define (it is a C keyword, "
                "a name C kernels use, or not a C identifier)"
            )
    for _, n, _ in tensors:
        if not is_c_name(n) or n in d.axes:
            raise ImportRefused(
                f"tensor {n!r} of definition {d.name} cannot be a C kernel parameter (a C keyword, "
                "a name C kernels use, not a C identifier, or an axis's name)"
            )


def count(
    definition: Definition,
    run: Callable[..., Any],
    sizes: Mapping[str, int],
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
) -> tuple[dict[str, float], dict[str, str]]:
    """run()'s costs for one workload's sizes, counted on the meta device (shapes only), or on
    random float32 tensors when it needs data and they are small; and the shapes it returns,
    checked."""
    torch = torch_module()
    nbytes = sum(t.nbytes(sizes) for t in (*inputs, *outputs))
    try:
        args = [torch.empty(t.dims(sizes), dtype=torch.float32, device="meta") for t in inputs]
        out, counts = count_forward(run, args)
    except Exception as exc:
        if mentions_gpu(exc):
            raise gpu_refusal(f"{definition.name}.reference.py", exc) from None
        if nbytes > CHECK_BYTES:
            raise Uncountable(
                f"run() needs data ({short_error(exc)}) and the sizes {dict(sizes)} take more "
                f"than {CHECK_BYTES >> 20} MiB"
            ) from None
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                args = [torch.randn(t.dims(sizes), dtype=torch.float32) for t in inputs]
            out, counts = count_forward(run, args)
        except Exception as exc2:
            raise ImportRefused(
                f"the reference of {definition.name} fails with sizes {dict(sizes)}: "
                f"{short_error(exc2)}"
            ) from None
    try:
        got = [tuple(t.shape) for t in output_tensors(out, [t.name for t in outputs])]
    except TypeError as exc:
        raise ImportRefused(f"the reference of {definition.name}: {exc}") from None
    want = [t.dims(sizes) for t in outputs]
    if got != want:
        raise ImportRefused(
            f"the reference of {definition.name} returns shapes {got} for sizes {dict(sizes)}, "
            f"where the definition's outputs have {want}"
        )
    notes = cost_notes(counts)
    notes["bytes"] = BYTES_NOTE.replace("inputs, parameters and outputs", "inputs and outputs")
    if not counts.matmul_ops and not counts.vector_ops:
        notes["matmul_flops"] = NOT_TORCH.format(term="matmul_flops")
        notes["vector_flops"] = NOT_TORCH.format(term="vector_flops")
    costs = {"matmul_flops": counts.matmul_flops, "vector_flops": counts.vector_flops}
    return {**costs, "bytes": float(nbytes)}, notes


def check_reference(problem: Problem) -> None:
    """Run the float64 reference once on the smallest workload (``workspace.check_reference``,
    as `problem add` does): a failure is a refusal, one that mentions a GPU says so."""
    error = workspace.check_reference(problem)
    if not error:
        return
    if mentions_gpu(error):
        raise ImportRefused(
            f"{problem.name} needs a GPU ({error}); accelopt runs an imported problem's "
            "reference on the CPU"
        )
    raise ImportRefused(f"definition {problem.name}: {error}")
