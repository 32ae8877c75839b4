"""A first measurement on a busy machine is not cached silently: it shows its progress, and ends
with one warning line on stderr that says the machine was busy, what was seen, that the ceilings
are provisional and what to do. The micro-benchmarks are faked (``cpu_spec.measure_figures``): no
compiler, no real run."""

from __future__ import annotations

import pytest

from accelopt.hardware import cache as hw_cache
from accelopt.hardware import cpu_spec, load_cpu_spec, measure_and_cache
from accelopt.hardware.figures import Figure, Measurement, Rounds, Sample, judged
from accelopt.hardware.isa import Isa
from accelopt.hardware.load import Load
from accelopt.hardware.spec import Confidence
from accelopt.hardware.toolchain import Compiler

QUIET = Load(loadavg=0.1, running=1, cpus=2, steal=0.0)
BUSY = Load(loadavg=3.1, running=1, cpus=2, steal=0.0)
# The busy VM: bandwidth rounds 44 % apart.
ROUNDS = {
    "matmul_rate": [104.8e9, 104.0e9, 104.5e9],
    "vector_rate": [52.0e9, 51.8e9, 52.1e9],
    "bandwidth": [26.1e9, 44.0e9, 46.2e9, 45.8e9],
}


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """This machine as measure_cpu sees it: x86_64 AVX2, its load and rounds as a test sets."""
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path))
    state = {"load": QUIET, "rounds": dict(ROUNDS), "calls": 0}

    def measure(ceilings, threads, compiler):
        state["calls"] += 1
        rounds, figures = {}, {}
        for c in ceilings:
            samples = tuple(Sample(v, 0.01, c, at=i) for i, v in enumerate(state["rounds"][c]))
            rounds[c] = Rounds(c, samples, control=c == "bandwidth")
            best = max(samples, key=lambda s: s.value)
            figure = Figure(best.value, 0.01, f"measured: {c}", rounds[c].disagreement)
            figures[c] = judged(c, figure, state["load"])
        return Measurement(figures, state["load"], rounds)

    monkeypatch.setattr(cpu_spec, "measure_figures", measure)
    monkeypatch.setattr(cpu_spec, "find_compiler", lambda: Compiler(("cc",), "fakecc 1.0"))
    isa = Isa("x86_64", ("avx", "avx2", "fma"), 256, ())
    monkeypatch.setattr(cpu_spec, "machine_isa", lambda compiler: isa)
    monkeypatch.setattr(cpu_spec, "cache_levels", lambda: [])
    monkeypatch.setattr(hw_cache, "library_figures", lambda threads: {})
    return state


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


def test_a_busy_first_measurement_is_cached_provisional_and_said_loudly(machine, capsys):
    machine["load"] = BUSY
    spec = load_cpu_spec()
    assert spec is not None and spec.provisional
    assert load_cpu_spec(measure_if_missing=False) == spec  # cached, as provisional
    err = capsys.readouterr().err
    (warning,) = _warnings(err)  # one line, however long: never wrapped
    assert warning == (
        "warning: the machine was busy while its ceilings were measured (bandwidth rounds 44% "
        "apart; 1-minute load average 3.10 on 2 CPUs), so they are provisional and may be too "
        "low (kernels may read above 100% of peak): accelopt measures them again, keeping the "
        "higher figures, once the machine is quiet; for ceilings you can trust now, stop the "
        "other work and run `accelopt hardware --measure`"
    )
    assert spec.doubts == ("bandwidth rounds 44% apart", "1-minute load average 3.10 on 2 CPUs")
    lines = err.splitlines()
    assert lines[0].startswith("ceilings: measuring this machine's ceilings once")
    assert lines[-2].startswith("ceilings: measured in ")
    assert lines[-2].endswith(
        "and cached: matmul 104.8 GFLOP/s, vector 52.1 GFLOP/s, bandwidth 46.2 GB/s; PROVISIONAL"
    )


def test_rounds_that_disagree_on_a_quiet_load_are_said_loudly_too(machine, capsys):
    spec = measure_and_cache()  # accelopt hardware --measure
    assert spec.provisional and spec.confidence["bandwidth"] is Confidence.UNSURE
    (warning,) = _warnings(capsys.readouterr().err)
    assert "(bandwidth rounds 44% apart)" in warning and "provisional" in warning


def test_a_quiet_measurement_warns_of_nothing(machine, capsys):
    machine["rounds"]["bandwidth"] = [46.0e9, 46.2e9, 45.9e9, 46.1e9]
    spec = load_cpu_spec()
    assert spec is not None and not spec.provisional
    err = capsys.readouterr().err
    assert _warnings(err) == [] and "PROVISIONAL" not in err
    assert err.splitlines()[-1].endswith("bandwidth 46.2 GB/s")


def test_a_vector_rate_a_seventh_of_fma_is_a_busy_measurement_said_loudly(machine, capsys):
    machine["rounds"]["bandwidth"] = [46.0e9, 46.2e9, 45.9e9, 46.1e9]
    machine["rounds"]["vector_rate"] = [15.0e9, 14.9e9, 14.8e9]  # 1/7 of 104.8
    spec = load_cpu_spec()
    assert spec is not None and spec.provisional
    (warning,) = _warnings(capsys.readouterr().err)
    assert "(vector rate 1/7 of the FMA rate (on x86_64 a quiet machine gives 1/2 to 1))" in (
        warning
    )


def test_the_warning_names_what_was_seen_or_says_it_was_not_recorded():
    from specs import make_spec

    from accelopt.hardware.notices import busy_warning

    assert "(its rounds or its load)" in busy_warning(make_spec(provisional=True))
