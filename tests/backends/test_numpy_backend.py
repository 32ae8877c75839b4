"""The ``numpy`` kernel kind: the problem's reference in float32, destination-passing."""

from __future__ import annotations

import numpy as np

from accelopt.backends.base import get_backend
from accelopt.backends.numpy.backend import blas_description, reference_kernel
from accelopt.problems import load_problem


def test_reference_kernel_is_the_problems_reference():
    problem = load_problem("silu")
    kernel = reference_kernel(problem)
    assert kernel.backend == "numpy" and kernel.name == "numpy"
    assert "def reference" in kernel.source


def test_loaded_reference_writes_the_outputs_in_place():
    problem = load_problem("matmul")
    sizes = problem.workload("small").sizes
    backend = get_backend("numpy")
    assert backend.check("anything") is None
    built = backend.build(reference_kernel(problem), problem, sizes, 1.0)
    assert built.ok
    loaded = backend.load(built.artifact, problem)
    lhs, rhs = problem.generate(sizes, 0)
    out = np.full(problem.output_shapes(sizes)[0], np.nan, dtype=np.float32)
    loaded([lhs, rhs, out])
    np.testing.assert_allclose(out, lhs @ rhs, rtol=1e-5)
    out.fill(np.nan)
    loaded.bind([lhs, rhs, out])()  # the timed call writes too
    np.testing.assert_allclose(out, lhs @ rhs, rtol=1e-5)


def test_blas_description_says_how_numpy_is_set_up(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    text = blas_description(2)
    assert text.startswith(f"NumPy {np.__version__}")
    assert "2 threads" in text and "OPENBLAS_CORETYPE=Haswell" in text
