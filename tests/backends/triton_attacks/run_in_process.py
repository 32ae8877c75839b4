"""The old way, for comparison: each Triton kernel imported and called inside the process that
judges it (as the worker did before kernels had a process of their own), in Triton's interpreter.
Usage: RESULTS KERNEL.py... ; one JSON line per kernel: whether it raised, and whether the output
check this process holds still tells a NaN output from silu's."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np
import torch

from accelopt.profiling.worker import checking


def run(path: str) -> dict[str, object]:
    spec = importlib.util.spec_from_file_location(f"attack_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    x = torch.linspace(-3, 3, 2048)
    y = torch.full_like(x, float("nan"))
    try:
        spec.loader.exec_module(module)
        module.kernel(x, y)
        raised = ""
    except BaseException as exc:
        raised = f"{type(exc).__name__}: {exc}"
    ref = (x / (1 + torch.exp(-x))).numpy().astype(np.float64)
    nan = np.full_like(ref, np.nan, dtype=np.float32)
    verdict = checking.check_outputs(["y"], [nan], [ref], 1e-5)
    return {"name": os.path.basename(path)[:-3], "raised": raised,
            "nan_output_passes": not verdict.error}  # fmt: skip


def main() -> None:
    results, *kernels = sys.argv[1:]
    with open(results, "w") as out:
        for kernel in kernels:
            out.write(json.dumps(run(kernel)) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
