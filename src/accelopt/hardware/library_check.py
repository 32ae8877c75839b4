"""Ceilings a library cannot beat: this machine's FMA ceiling against the best sgemm it can run
(torch's MKL/oneDNN, NumPy's BLAS) and its bandwidth against a plain parallel copy.

A micro-benchmark measured under load, or one a CPU runs below its best, gives a ceiling that a
library beats: a kernel would then read "108 % of peak". A measurement therefore ends with this
check (``cache.measure_and_cache``, ``cache.refresh``). A ceiling a library beats is re-measured;
one that is still beaten is raised to the library's figure, said in its provenance, and its
``library_scale`` (the library's figure over the micro-benchmark's) scales the control timed with
each kernel, so that calibrated figures are against the raised ceiling too.

The libraries run in a child process (``python -m accelopt.hardware.library_check THREADS``:
their thread pools never enter the caller), which prints one JSON line; a library that is not
installed, or a child that fails, gives no figure, never an error.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from accelopt import settings
from accelopt.hardware.spec import HardwareSpec

SGEMM_N = 2048  # 17 GFLOP a call: long enough to time, short enough for a few repeats
COPY_BYTES = 512 << 20  # per array: far past any LLC here
REPEATS = 5
TIMEOUT_S = 120.0
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class LibraryFigure:
    """What a library reached for one ceiling (FLOP/s or bytes/s), and how."""

    ceiling: str  # matmul_rate or bandwidth
    rate: float
    source: str


def _best_seconds(call: Callable[[], object]) -> float:
    call()  # warm: pages touched, thread pools started
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def _torch_figures(threads: int) -> list[LibraryFigure]:
    try:
        import torch
    except ImportError:
        return []
    torch.set_num_threads(threads)
    blas = "MKL" if torch.backends.mkl.is_available() else "its BLAS"
    a, b, c = (torch.randn(SGEMM_N, SGEMM_N) for _ in range(3))
    seconds = _best_seconds(lambda: torch.mm(a, b, out=c))
    where = f"torch {torch.__version__} ({blas})"
    n = COPY_BYTES // 4
    src, dst = torch.ones(n), torch.empty(n)
    copy_s = _best_seconds(lambda: dst.copy_(src))
    return [
        LibraryFigure("matmul_rate", 2 * SGEMM_N**3 / seconds, f"{where} sgemm {SGEMM_N}^3"),
        LibraryFigure("bandwidth", 2 * COPY_BYTES / copy_s, f"{where} copy of 512 MiB"),
    ]


def _numpy_figures() -> list[LibraryFigure]:
    import numpy as np

    a, b = (np.ones((SGEMM_N, SGEMM_N), dtype=np.float32) for _ in range(2))
    c = np.empty_like(a)
    seconds = _best_seconds(lambda: np.matmul(a, b, out=c))
    where = f"NumPy {np.__version__} sgemm {SGEMM_N}^3"
    return [LibraryFigure("matmul_rate", 2 * SGEMM_N**3 / seconds, where)]


def best_figures(found: list[LibraryFigure]) -> dict[str, LibraryFigure]:
    """The highest figure per ceiling."""
    best: dict[str, LibraryFigure] = {}
    for figure in found:
        if figure.ceiling not in best or figure.rate > best[figure.ceiling].rate:
            best[figure.ceiling] = figure
    return best


def beaten(values: dict[str, float], best: dict[str, LibraryFigure]) -> list[str]:
    """The ceilings (by name, with their values) that a library's figure is above."""
    return [name for name, figure in best.items() if figure.rate > values.get(name, 0.0)]


def _figure(ceiling: str, value: float) -> str:
    return f"{value / 1e9:,.1f} {'GB/s' if ceiling == 'bandwidth' else 'GFLOP/s'}"


def with_library(spec: HardwareSpec, best: dict[str, LibraryFigure]) -> HardwareSpec:
    """``spec`` with the libraries' figures noted and each ceiling they beat raised to them
    (with its ``library_scale`` and a provenance that says so)."""
    provenance, scale = dict(spec.provenance), dict(spec.library_scale)
    update: dict[str, object] = {}
    for name, figure in best.items():
        own = getattr(spec, name)
        provenance[f"library {name}"] = f"{figure.source}: {_figure(name, figure.rate)}"
        if figure.rate > own:
            update[name] = figure.rate
            scale[name] = figure.rate / own * scale.get(name, 1.0)
            provenance[name] = (
                f"raised to what {figure.source} reached ({_figure(name, figure.rate)}), above "
                f"the micro-benchmark's {_figure(name, own)} even re-measured; "
                f"{provenance.get(name, '')}"
            ).rstrip("; ")
    library = {name: figure.rate for name, figure in best.items()}
    return spec.model_copy(
        update={**update, "provenance": provenance, "library": library, "library_scale": scale}
    )


def library_figures(threads: int, python: str = sys.executable) -> dict[str, LibraryFigure]:
    """The libraries' best figures on ``threads`` threads, run in a child process; {} when it
    fails or times out."""
    command = [python, "-m", "accelopt.hardware.library_check", str(threads)]
    counts = {
        v: str(threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    }
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env={**settings.environment(), **counts},
        )
        rows = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {}
    return best_figures([LibraryFigure(**row) for row in rows])


def _main(threads: int) -> None:
    found = _numpy_figures() + _torch_figures(threads)
    print(json.dumps([figure.__dict__ for figure in found]))


if __name__ == "__main__":
    _main(int(sys.argv[1]))
