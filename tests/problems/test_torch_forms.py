"""Every suite problem's torch_form.py (the problem written in PyTorch as an engineer writes it)
keeps its contract and computes what the problem's NumPy reference computes, to the harness's
tolerance: on the tiny and small workloads, eagerly; torch.compile'd for two problems (slow)."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from accelopt.problems import load_problem
from accelopt.problems.loader import SUITE_DIR, suite_names
from accelopt.problems.records import Problem
from accelopt.profiling.worker.correctness import check_outputs

torch = pytest.importorskip("torch")

NAMES = suite_names()
WORKLOADS = ("tiny", "small")
ALLOWED_IMPORTS = {"torch", "torch.nn.functional", "math"}


def torch_form(name: str) -> ModuleType:
    return importlib.import_module(f"accelopt.problems.suite.{name}.torch_form")


def run_and_check(problem: Problem, forward, workload: str, seed: int = 0) -> None:
    """Run forward on torch copies of the inputs and check its outputs against the reference
    (computed in float64, as the harness does), and that it left the inputs alone."""
    sizes = problem.workload(workload).sizes
    inputs = problem.generate(sizes, seed)
    tensors = [torch.from_numpy(a.copy()) for a in inputs]
    with torch.no_grad():
        outputs = forward(*tensors)
    assert isinstance(outputs, tuple)
    assert len(outputs) == len(problem.outputs)
    for spec, out in zip(problem.outputs, outputs, strict=True):
        assert isinstance(out, torch.Tensor), spec.name
        assert out.dtype == torch.float32, spec.name
        assert tuple(out.shape) == spec.dims(sizes), spec.name
    for spec, before, after in zip(problem.inputs, inputs, tensors, strict=True):
        assert np.array_equal(after.numpy(), before), f"forward modified input {spec.name!r}"
    refs = problem.reference(*(a.astype(np.float64) for a in inputs))
    check = check_outputs(
        [t.name for t in problem.outputs],
        [o.contiguous().numpy() for o in outputs],
        list(refs),
        problem.tolerance,
    )
    assert check.error == "", check.error


def test_every_suite_problem_has_a_torch_form() -> None:
    missing = [n for n in NAMES if not (SUITE_DIR / n / "torch_form.py").is_file()]
    assert not missing


@pytest.mark.parametrize("name", NAMES)
def test_torch_form_keeps_its_contract(name: str) -> None:
    """A docstring naming the problem, imports of torch (and math) only, and forward taking the
    problem's inputs by their names, in order."""
    path = SUITE_DIR / name / "torch_form.py"
    tree = ast.parse(path.read_text())
    doc = ast.get_docstring(tree) or ""
    assert doc.startswith(f"{name} in PyTorch, as an engineer writes it: "), doc
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert imported <= ALLOWED_IMPORTS, imported - ALLOWED_IMPORTS
    params = list(inspect.signature(torch_form(name).forward).parameters)
    assert params == [t.name for t in load_problem(name).inputs]


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("name", NAMES)
def test_torch_form_matches_the_reference(name: str, workload: str) -> None:
    run_and_check(load_problem(name), torch_form(name).forward, workload)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["silu", "rmsnorm_matmul"])
def test_compiled_torch_form_matches_the_reference(name: str) -> None:
    """torch.compile(forward, fullgraph=True) (Inductor, which compiles C++ here: tens of
    seconds) gives the reference's result too, and the eager form's to float32 rounding."""
    problem = load_problem(name)
    forward = torch_form(name).forward
    compiled = torch.compile(forward, fullgraph=True)
    run_and_check(problem, compiled, "tiny")
    inputs = [torch.from_numpy(a) for a in problem.generate(problem.workload("tiny").sizes, 1)]
    with torch.no_grad():
        for got, want in zip(compiled(*inputs), forward(*inputs), strict=True):
            torch.testing.assert_close(got, want)


def test_forms_live_beside_their_problems() -> None:
    assert all(Path(torch_form(n).__file__).parent == SUITE_DIR / n for n in NAMES)
