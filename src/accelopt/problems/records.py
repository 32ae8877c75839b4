"""Problem records: what an operator computes, on which sizes, and what it costs.

A problem is plain data plus three functions (reference, input generator, cost model). The
folder of each problem under ``suite/`` builds one ``Problem`` in its ``problem.py``. A
``Workload`` (``problems.sizes``, imported here) binds the sizes to a name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accelopt.problems.sizes import Workload, sized_name, sized_workload

Sizes = Mapping[str, int]
Arrays = tuple[np.ndarray, ...]


@dataclass(frozen=True)
class TensorSpec:
    """A float32, contiguous, row-major tensor whose shape is written in size parameters.

    Each entry of ``shape`` names a size parameter, or is a decimal literal (``"1"``) for an
    axis whose length never changes (an imported problem's ``keepdim`` axis, say)."""

    name: str
    shape: tuple[str, ...]

    def dims(self, sizes: Sizes) -> tuple[int, ...]:
        return tuple(int(p) if p.isdigit() else int(sizes[p]) for p in self.shape)

    def nbytes(self, sizes: Sizes) -> int:
        return 4 * int(np.prod(self.dims(sizes), dtype=np.int64))


@dataclass(frozen=True)
class Cost:
    """A cost model evaluated on one workload: FLOPs by unit and bytes moved."""

    matmul_flops: float
    vector_flops: float
    bytes: float


@dataclass(frozen=True)
class CostModel:
    """The benchmark's cost model: each term a function of the sizes, written out in problem.py."""

    matmul_flops: Callable[[Sizes], float]
    vector_flops: Callable[[Sizes], float]
    bytes: Callable[[Sizes], float]

    def at(self, sizes: Sizes) -> Cost:
        """The cost at these sizes."""
        return Cost(
            matmul_flops=float(self.matmul_flops(sizes)),
            vector_flops=float(self.vector_flops(sizes)),
            bytes=float(self.bytes(sizes)),
        )


def normal_inputs(rng: np.random.Generator, shapes: list[tuple[int, ...]]) -> Arrays:
    """The default input generator: independent N(0, 1) float32 tensors."""
    return tuple(rng.standard_normal(s, dtype=np.float32) for s in shapes)


@dataclass(frozen=True)
class Problem:
    """An operator to optimize.

    ``reference`` takes the inputs (float32 or float64 arrays) and returns the outputs in the same
    dtype; the harness calls it in float64 to judge correctness. ``generate`` makes the inputs for
    a seed; the default is N(0, 1), never zeros.
    """

    name: str
    description: str
    params: tuple[str, ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    reference: Callable[..., Arrays]
    cost: CostModel
    workloads: Mapping[str, Workload]
    directory: Path
    tolerance: float = 2e-5
    generator: Callable[[np.random.Generator, list[tuple[int, ...]]], Arrays] = field(
        default=normal_inputs
    )
    # How each cost term was obtained (``matmul_flops``, ``vector_flops``, ``bytes`` -> a short
    # sentence); empty for a cost model written out by hand.
    cost_notes: Mapping[str, str] = field(default_factory=dict)
    # Python modules the reference and the generator import (``("torch",)`` for an imported
    # PyTorch problem); a command that evaluates says what to install when one is missing.
    requires: tuple[str, ...] = ()
    # What the agents are shown as the reference (e.g. an imported PyTorch model with the kernel
    # arguments it maps to); empty: the reference function's own source.
    reference_text: str = ""
    # Set by the loader: "suite" (shipped with accelopt) or "workspace" (a user's problem), and
    # for a workspace problem a hash of its folder's files (its evaluations and references are
    # cached under it, so an edited problem never reuses a stale verdict).
    origin: str = "suite"
    fingerprint: str = ""

    @property
    def versioned_name(self) -> str:
        """The name, with the fingerprint of a workspace problem (``name@fingerprint``): what
        caches of its inputs and references are keyed by."""
        return f"{self.name}@{self.fingerprint}" if self.fingerprint else self.name

    def interface(self) -> dict[str, Any]:
        """The kernel's interface as JSON: its size parameters, its inputs and outputs with their
        shapes (names of sizes), and the tolerance it is checked to."""
        return {
            "params": list(self.params),
            "inputs": [{"name": t.name, "shape": list(t.shape)} for t in self.inputs],
            "outputs": [{"name": t.name, "shape": list(t.shape)} for t in self.outputs],
            "tolerance": self.tolerance,
        }

    def workload(self, name: str) -> Workload:
        """The named workload, or the one ``name`` gives the sizes of (``M=512,N=768,K=384``:
        every size parameter, in any order), under its canonical name (``problems.sizes``); a
        KeyError, one sentence saying what to give, otherwise."""
        if name in self.workloads:
            return self.workloads[name]
        example = self._sized_example()
        sized = sized_workload(self.params, name, owner=f"problem {self.name!r}", example=example)
        if sized is not None:
            return self._costed(sized)
        known = ", ".join(sorted(self.workloads))
        raise KeyError(
            f"problem {self.name!r} has no workload {name!r}; choose one of: {known}, or give "
            f"its sizes, e.g. {example}"
        )

    def _costed(self, sized: Workload) -> Workload:
        """``sized``, once the problem's cost model takes its sizes (an imported problem's
        counted costs know its own workloads only); a KeyError saying why not otherwise."""
        try:
            self.cost.at(sized.sizes)
        except Exception as exc:  # the problem's own code: any failure refuses these sizes
            why = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
            raise KeyError(
                f"problem {self.name!r} cannot run workload {sized.name!r}: its cost model "
                f"fails on those sizes ({why})"
            ) from None
        return sized

    def workload_name(self, name: str) -> str:
        """The name the workload ``name`` is kept under: its own for a named workload, the
        canonical one (``M=512,N=768,K=384``) for one given by its sizes in any order; a
        KeyError as ``workload``'s otherwise."""
        return name if name in self.workloads else self.workload(name).name

    def has_workload(self, name: str) -> bool:
        """Whether ``workload(name)`` finds a workload (named, or given by its sizes)."""
        try:
            self.workload(name)
        except KeyError:
            return False
        return True

    def _sized_example(self) -> str:
        """A workload's sizes as a sized name, for sentences: the cpu workload's, else the
        first one's."""
        named = self.workloads.get("cpu") or next(iter(self.workloads.values()), None)
        if named is None or any(p not in named.sizes for p in self.params):
            return ",".join(f"{p}=..." for p in self.params)
        return sized_name(self.params, named.sizes)

    def generate(self, sizes: Sizes, seed: int) -> Arrays:
        rng = np.random.default_rng(seed)
        arrays = self.generator(rng, [t.dims(sizes) for t in self.inputs])
        return tuple(np.ascontiguousarray(a, dtype=np.float32) for a in arrays)

    def output_shapes(self, sizes: Sizes) -> list[tuple[int, ...]]:
        return [t.dims(sizes) for t in self.outputs]

    def buffer_bytes(self, sizes: Sizes) -> int:
        """Bytes of one set of input and output buffers."""
        return sum(t.nbytes(sizes) for t in (*self.inputs, *self.outputs))
