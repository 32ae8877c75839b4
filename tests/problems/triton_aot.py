"""Compile the shipped Triton baselines for an NVIDIA GPU, without one: ahead of time, for sm_90
(H100/H200), at a workload's sizes, with the ptxas Triton bundles for that target.

The interpreter that checks kernels in CI runs what a GPU would refuse (a block too large for
shared memory, registers that spill): this compiles each launch the launcher makes, on meta
tensors (shapes and strides, no memory), and reports per kernel the registers, spills and shared
memory. Run by tests/problems/test_triton_baselines_compile.py in a subprocess (not in the
interpreter), or by hand:

    python tests/problems/triton_aot.py [--workload paper] [PROBLEM ...]

One JSON line per launch: problem, kernel, grid, registers, spill_bytes, shared_bytes, or error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

from accelopt.backends.registry import shipped_kernel
from accelopt.problems.loader import list_problems, load_problem

TARGET = GPUTarget("cuda", 90, 32)
POINTERS = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16",
            torch.int32: "*i32", torch.int64: "*i64"}  # fmt: skip
OPTIONS = ("num_warps", "num_stages", "num_ctas")


def _signature(fn: JITFunction, values: dict[str, Any]) -> tuple[dict, dict, dict]:
    signature: dict[str, str] = {}
    constants: dict[str, Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for i, (name, param) in enumerate(zip(fn.arg_names, fn.params, strict=True)):
        value = values.get(name, param.default)
        if param.is_constexpr or value is None or (isinstance(value, int) and value == 1):
            signature[name], constants[name] = "constexpr", value  # as Triton specializes 1
        elif isinstance(value, torch.Tensor):
            signature[name] = POINTERS[value.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]  # torch allocations are 16-byte aligned
        elif isinstance(value, bool):
            signature[name] = "i1"
        elif isinstance(value, int):
            signature[name] = "i64" if abs(value) >= 2**31 else "i32"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"argument {name!r}: {type(value).__name__} is not handled")
    return signature, constants, attrs


def _ptxas_report(ptx: str) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.ptx"
        path.write_text(ptx)
        ptxas = get_ptxas(TARGET.arch).path
        command = [ptxas, f"-arch=sm_{TARGET.arch}a", "-v", str(path), "-o", "/dev/null"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    registers = re.search(r"Used (\d+) registers", done.stderr)
    stores = re.search(r"(\d+) bytes spill stores", done.stderr)
    loads = re.search(r"(\d+) bytes spill loads", done.stderr)
    return {
        "registers": int(registers.group(1)) if registers else -1,
        "spill_bytes": sum(int(m.group(1)) for m in (stores, loads) if m),
    }


class _Capture:
    """Stands for ``fn[grid]``: compiles the launch instead of running it."""

    def __init__(self, fn: JITFunction, grid: Any, sink: list[dict[str, Any]]) -> None:
        self.fn, self.grid, self.sink = fn, grid, sink

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        values = dict(zip(self.fn.arg_names, args, strict=False)) | kwargs
        grid = self.grid(values) if callable(self.grid) else self.grid
        options = {k: kwargs[k] for k in OPTIONS if k in kwargs}
        record: dict[str, Any] = {"kernel": self.fn.__name__, "grid": list(grid)}
        try:
            signature, constants, attrs = _signature(self.fn, values)
            source = ASTSource(self.fn, signature, constants, attrs)
            compiled = triton.compile(source, target=TARGET, options=options)
            record |= _ptxas_report(compiled.asm["ptx"])
            record["shared_bytes"] = int(compiled.metadata.shared)
        except Exception as exc:  # a kernel the GPU compiler refuses is the finding
            record["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        self.sink.append(record)


def compile_problem(name: str, workload: str) -> list[dict[str, Any]]:
    problem = load_problem(name)
    sizes = problem.workload(workload).sizes
    spec = importlib.util.spec_from_file_location(
        f"aot_{name}", shipped_kernel(problem, "baseline", "triton")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    launches: list[dict[str, Any]] = []
    original = JITFunction.__getitem__
    JITFunction.__getitem__ = lambda fn, grid: _Capture(fn, grid, launches)  # type: ignore[method-assign]
    try:
        arrays = [torch.empty(t.dims(sizes), device="meta") for t in problem.inputs]
        arrays += [torch.empty(s, device="meta") for s in problem.output_shapes(sizes)]
        module.kernel(*arrays)
    finally:
        JITFunction.__getitem__ = original  # type: ignore[method-assign]
    return [{"problem": name, **launch} for launch in launches]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="*")
    parser.add_argument("--workload", default="paper")
    args = parser.parse_args()
    for name in args.problems or list_problems():
        for record in compile_problem(name, args.workload):
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    sys.exit(main())
