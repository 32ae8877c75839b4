"""Ceilings a library cannot beat: a measurement ends by running the best sgemm and copy it can
(torch, NumPy); a ceiling one beats is re-measured, and raised to the library's figure if it is
still beaten, with a provenance that says so and a scale for the control timed with kernels."""

from __future__ import annotations

import pytest

from accelopt.hardware import cache as hw_cache
from accelopt.hardware.figures import Figure, Measurement
from accelopt.hardware.library_check import LibraryFigure, library_figures, with_library
from accelopt.hardware.load import Load
from accelopt.hardware.measure import CEILINGS
from accelopt.hardware.spec import HardwareSpec

SPEC = HardwareSpec(
    name="cpu:test", backend="cpu", matmul_rate=1.0e11, vector_rate=5.0e10, bandwidth=4.0e10,
    cores=2, isa=("avx2", "fma"), provenance={"matmul_rate": "measured: test"},
)  # fmt: skip
SGEMM = LibraryFigure("matmul_rate", 1.5e11, "torch 9 (MKL) sgemm 2048^3")
COPY = LibraryFigure("bandwidth", 3.0e10, "torch 9 (MKL) copy of 512 MiB")


def test_a_beaten_ceiling_is_raised_to_the_library_and_says_so() -> None:
    checked = with_library(SPEC, {"matmul_rate": SGEMM, "bandwidth": COPY})
    assert checked.matmul_rate == SGEMM.rate and checked.bandwidth == SPEC.bandwidth
    assert checked.library_scale == {"matmul_rate": pytest.approx(1.5)}
    assert checked.provenance["matmul_rate"].startswith("raised to what torch 9 (MKL) sgemm")
    assert "measured: test" in checked.provenance["matmul_rate"]
    assert checked.provenance["library bandwidth"] == "torch 9 (MKL) copy of 512 MiB: 30.0 GB/s"
    assert checked.library == {"matmul_rate": SGEMM.rate, "bandwidth": COPY.rate}
    assert checked.key() != SPEC.key()  # results against the old ceiling are not reused


def test_a_beaten_ceiling_has_every_ceiling_measured_again_before_it_is_raised(
    monkeypatch, capsys
) -> None:
    """A library beating one ceiling says the measurement was disturbed: the vector rate, which
    no library checks, is measured again with it (it stayed at its busy figure before)."""
    measured: list[list[str]] = []
    again = {"matmul_rate": 1.6e11, "vector_rate": 8.0e10, "bandwidth": 3.9e10}

    def measure(names, threads, repeat_factor=1):
        measured.append(list(names))
        found = {name: Figure(again[name], 0.01, "re-measured") for name in names}
        return Measurement(found, Load(loadavg=0.1, running=1, cpus=2, steal=0.0))

    monkeypatch.setattr(hw_cache, "library_figures", lambda threads: {"matmul_rate": SGEMM})
    monkeypatch.setattr(hw_cache, "measure_figures", measure)
    checked = hw_cache.library_checked(SPEC)
    assert measured == [list(CEILINGS)]
    assert checked.matmul_rate == 1.6e11 and checked.library_scale == {}
    assert checked.vector_rate == 8.0e10  # measured again with it: higher, taken
    assert checked.bandwidth == SPEC.bandwidth  # lower: kept
    assert "beat the first figure" in checked.provenance["matmul_rate"]
    err = capsys.readouterr().err
    assert "above the matmul ceiling 100.0 GFLOP/s" in err
    assert "matmul 100.0 → 160.0 GFLOP/s, vector 50.0 → 80.0 GFLOP/s" in err


def test_the_control_is_scaled_as_the_ceiling_was(hw: HardwareSpec) -> None:
    from accelopt.hardware.roofline import roofline
    from accelopt.problems import load_problem
    from accelopt.profiling.parent.scoring import _scaled
    from accelopt.profiling.worker.protocol import KernelResult

    matmul = load_problem("matmul")
    roof = roofline(matmul.cost.at(matmul.workload("small").sizes), hw)
    raised = hw.model_copy(update={"library_scale": {"matmul_rate": 1.25}})
    result = KernelResult(latency_s=1e-3, control_rates=[1e11, None, 2e11])
    assert _scaled(result, raised, roof).control_rates == [1.25e11, None, 2.5e11]
    assert _scaled(result, hw, roof) is result


@pytest.mark.slow
def test_the_libraries_here_give_figures_in_a_child_process() -> None:
    pytest.importorskip("numpy")
    best = library_figures(1)
    assert best["matmul_rate"].rate > 1e8 and "sgemm 2048^3" in best["matmul_rate"].source
