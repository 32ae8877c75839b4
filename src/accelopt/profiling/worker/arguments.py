"""A kernel's arguments: the problem's inputs, then its outputs, at the workload's sizes on the
evaluation's device.

Made plain (the rotation sets the kernel is timed on) or fenced (the correctness calls': an access
beyond a guard region faults), outputs filled with NaN (an output left unwritten fails its check),
named in errors, and checked after a call: the guard regions around every argument must be as they
were made (``backends/guards.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelopt.backends.device import Buffer, Device
from accelopt.backends.guards import describe, find_overruns
from accelopt.backends.status import Status
from accelopt.problems.records import Problem, Sizes
from accelopt.profiling.worker.steps import Failed


@dataclass(frozen=True)
class Arguments:
    device: Device
    problem: Problem
    sizes: Sizes

    def inputs(self, fill: float | None = None, fenced: bool = False) -> list[Buffer]:
        """New input buffers, filled with ``fill`` when given."""
        dims = [t.dims(self.sizes) for t in self.problem.inputs]
        return [self.device.empty(d, fill, fenced=fenced) for d in dims]

    def outputs(self, fenced: bool = False) -> list[Buffer]:
        """New output buffers, filled with NaN."""
        shapes = self.problem.output_shapes(self.sizes)
        return [self.device.empty(s, np.nan, fenced=fenced) for s in shapes]

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.problem.inputs]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.problem.outputs]

    def labels(self) -> list[str]:
        """How the kernel's arguments are named in errors, in call order."""
        return [f"input {name!r}" for name in self.input_names] + [
            f"output {name!r}" for name in self.output_names
        ]

    def check_guards(self, arrays: Sequence[Buffer], detail: str) -> None:
        """The guard regions around every argument must be as they were made (guards.py)."""
        for label, buffer in zip(self.labels(), arrays, strict=True):
            guards = self.device.guards(buffer)
            overruns = find_overruns(guards) if guards is not None else []
            if overruns:
                raise Failed(Status.INCORRECT, f"the kernel {describe(label, overruns)} ({detail})")
