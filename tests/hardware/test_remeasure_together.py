"""One beaten ceiling has every ceiling re-measured together, once: the spec (and its key)
changes once, not once per ceiling (the issue's run: matmul 104.8 -> 246.7 -> 396.6 GFLOP/s one
at a time, the vector rate left at its busy figure, four keys in an hour). The micro-benchmarks
are faked (``cache.measure_figures``)."""

from __future__ import annotations

import pytest
from specs import make_spec

from accelopt.hardware import cache as hw_cache
from accelopt.hardware import load_cpu_spec, save_cpu_spec
from accelopt.hardware.figures import Figure, Measurement, judged
from accelopt.hardware.load import Load
from accelopt.hardware.measure import CEILINGS
from accelopt.hardware.spec import Confidence

QUIET = Load(loadavg=0.1, running=1, cpus=2, steal=0.0)
# The first measurement, on a busy machine: every figure low, the vector rate 1/7 of FMA.
BUSY = make_spec(
    name="cpu:test",
    matmul_rate=104.8e9,
    vector_rate=15.0e9,
    bandwidth=12.0e9,
    arch="x86_64",
    isa=("avx", "avx2", "fma"),
    provisional=True,
    confidence={c: Confidence.UNSURE for c in CEILINGS},
    provenance={c: f"measured: {c} on a busy machine" for c in CEILINGS},
)
QUIET_FIGURES = {"matmul_rate": 396.6e9, "vector_rate": 198.0e9, "bandwidth": 50.0e9}


@pytest.fixture
def remeasure(monkeypatch, tmp_path):
    """measure_figures on a quiet machine: the figures of QUIET_FIGURES; its calls recorded."""
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path))
    calls: list[tuple[str, ...]] = []

    def measure(ceilings, threads=None, repeat_factor=1):
        calls.append(tuple(ceilings))
        figures = {
            c: judged(c, Figure(QUIET_FIGURES[c], 0.01, f"measured: {c} quietly", 0.01), QUIET)
            for c in ceilings
        }
        return Measurement(figures, QUIET)

    monkeypatch.setattr(hw_cache, "measure_figures", measure)
    return calls


def test_one_beaten_ceiling_remeasures_all_of_them_once_and_says_old_to_new(remeasure, capsys):
    save_cpu_spec(BUSY)
    raised = hw_cache.raise_ceiling(BUSY, "bandwidth", "silu [cpu] reached 412% of peak")
    assert remeasure == [CEILINGS]  # every ceiling, in one measurement
    assert (raised.matmul_rate, raised.vector_rate, raised.bandwidth) == (
        396.6e9,
        198.0e9,
        50.0e9,
    )
    assert not raised.provisional and raised.doubts == ()  # the re-measurement was quiet
    assert load_cpu_spec(measure_if_missing=False) == raised
    err = capsys.readouterr().err
    assert (
        "ceilings: a kernel beat the bandwidth ceiling (silu [cpu] reached 412% of peak): "
        "re-measuring every ceiling together\n"
    ) in err
    assert (
        "ceilings: re-measured together: matmul 104.8 → 396.6 GFLOP/s, vector 15.0 → 198.0 "
        "GFLOP/s, bandwidth 12.0 → 50.0 GB/s\n"
    ) in err
    assert "warning:" not in err


def test_a_ceiling_beaten_in_another_process_meanwhile_is_not_measured_again(remeasure, capsys):
    """Two runs that started on the busy spec: the second's beaten matmul ceiling takes what the
    first re-measured, so the cached spec has had two keys, not three."""
    save_cpu_spec(BUSY)
    first = hw_cache.raise_ceiling(BUSY, "bandwidth", "silu reached 412% of peak")
    second = hw_cache.raise_ceiling(BUSY, "matmul_rate", "matmul reached 230% of peak")
    assert remeasure == [CEILINGS]  # measured once
    assert second.key() == first.key() != BUSY.key()
    assert "another process re-measured every ceiling meanwhile" in capsys.readouterr().err


def test_a_ceiling_raised_to_a_library_and_measured_above_it_loses_its_scale(remeasure):
    raised = BUSY.model_copy(update={"library_scale": {"matmul_rate": 1.5, "bandwidth": 1.2}})
    save_cpu_spec(raised)
    again = hw_cache.raise_ceiling(raised, "matmul_rate", "why")
    assert again.library_scale == {}  # both measured above the libraries' figures now


def test_a_provisional_spec_measured_again_when_quiet_says_old_to_new(
    remeasure, monkeypatch, capsys
):
    quiet = BUSY.model_copy(update={"provisional": False, **QUIET_FIGURES})
    monkeypatch.setattr(hw_cache, "measure_cpu", lambda threads=None: quiet)
    monkeypatch.setattr(hw_cache, "machine_load", lambda: QUIET)
    monkeypatch.setattr(hw_cache, "library_figures", lambda threads: {})
    monkeypatch.setattr(hw_cache, "REFRESH_AFTER_S", 0)
    save_cpu_spec(BUSY)
    spec = load_cpu_spec()
    assert spec is not None and not spec.provisional
    err = capsys.readouterr().err
    assert "ceilings: the cached ceilings are provisional and the machine is quiet now" in err
    assert "re-measured together: matmul 104.8 → 396.6 GFLOP/s, vector 15.0 → 198.0" in err
