"""Matmul kernels whose relative speeds the re-timing tests know: the good i-k-j variant and the
same code run ``passes`` times over.

Importable as ``matmul_variants`` (tests/conftest.py puts this folder on ``sys.path``).

A kernel that runs the product twice is not twice as slow on the ``small`` workload (64x192x80):
the second pass finds its inputs in cache and the call's fixed cost does not double, so side by
side it measured 1.13 to 1.56 times the first here and 1.37 on CI. Eight passes measured 3.3 to
5.2 times, far from any threshold a test sets near 2."""

from __future__ import annotations

from pathlib import Path

GOOD = (Path(__file__).parents[1] / "search" / "variants" / "matmul_good.c").read_text()


def repeated(passes: int) -> str:
    """``GOOD`` computing the whole product ``passes`` times (volatile: the compiler cannot know
    the passes are identical and fold them)."""
    return GOOD.replace(
        "#pragma omp parallel for",
        f"volatile int passes = {passes};\n    for (int p = 0; p < passes; p++)\n"
        "#pragma omp parallel for",
        1,
    )
