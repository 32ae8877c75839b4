"""A vector rate far below the FMA rate, on a CPU whose ISA issues both on the same pipes, is a
busy measurement: the spec is provisional, never cached as if it were sure. Detected from the
spec's architecture and ISA, never assumed: Intel AVX2 and AVX-512 (vector = FMA / 2), AMD Zen
(vector = FMA), aarch64 NEON all pass; an architecture the ISA was not read for is left alone."""

from __future__ import annotations

import pytest
from specs import make_spec

from accelopt.hardware import cpu_spec
from accelopt.hardware.consistency import VECTOR_FLOOR, rate_doubt, rates_checked
from accelopt.hardware.figures import Figure, Measurement
from accelopt.hardware.isa import Isa
from accelopt.hardware.load import Load
from accelopt.hardware.measure import CEILINGS
from accelopt.hardware.spec import Confidence
from accelopt.hardware.toolchain import Compiler

QUIET = Load(loadavg=0.1, running=1, cpus=2, steal=0.0)
AVX2 = ("sse4_2", "avx", "avx2", "fma")
AVX512 = (*AVX2, "avx512f", "avx512bw", "avx512dq", "avx512vl")


def _spec(vector: float, matmul: float = 400e9, arch: str | None = "x86_64", isa=AVX2, **kw):
    return make_spec(matmul_rate=matmul, vector_rate=vector, arch=arch, isa=isa, **kw)


@pytest.mark.parametrize(
    ("arch", "isa", "ratio"),
    [
        ("x86_64", AVX2, 0.5),  # Intel AVX2: multiply and add share the two FMA ports
        ("x86_64", AVX2, 1.0),  # AMD Zen 3, AVX2 only: separate add pipes
        ("x86_64", AVX512, 0.5),  # Intel AVX-512
        ("x86_64", AVX512, 1.0),  # AMD Zen 4 AVX-512 (measured here: 234.8 and 234.9 GFLOP/s)
        ("x86_64", ("sse4_2",), 1.0),  # no FMA: both builds are a multiply then an add
        ("aarch64", ("neon", "fma"), 0.5),  # NEON: FMLA, FMUL and FADD on the same pipes
    ],
)
def test_rates_a_quiet_machine_gives_pass(arch, isa, ratio):
    spec = _spec(vector=400e9 * ratio, arch=arch, isa=isa)
    assert rate_doubt(spec) is None
    assert rates_checked(spec) is spec


def test_a_vector_rate_a_seventh_of_the_fma_rate_is_a_busy_measurement():
    sure = {c: Confidence.SURE for c in CEILINGS}
    load = {"load": "quiet during the measurement"}
    spec = _spec(vector=400e9 / 7, confidence=sure, provenance=load)
    why = "vector rate 1/7 of the FMA rate (on x86_64 a quiet machine gives 1/2 to 1)"
    assert rate_doubt(spec) == ("vector_rate", why)
    checked = rates_checked(spec)
    assert checked.provisional
    assert checked.confidence["vector_rate"] is Confidence.UNSURE
    assert checked.confidence["matmul_rate"] is Confidence.SURE
    assert checked.doubts == (why,)
    assert checked.provenance["load"].startswith("provisional: vector rate 1/7 of the FMA rate")
    assert checked.key() == spec.key()  # only how far to trust it changed
    assert rates_checked(checked) == checked  # said once, however often checked


@pytest.mark.parametrize("arch", ["aarch64", "x86_64"])
def test_the_floor_holds_on_every_detected_architecture(arch):
    isa = ("neon", "fma") if arch == "aarch64" else AVX512
    assert rate_doubt(_spec(vector=400e9 * VECTOR_FLOOR * 0.9, arch=arch, isa=isa)) is not None
    assert rate_doubt(_spec(vector=400e9 * VECTOR_FLOOR * 1.1, arch=arch, isa=isa)) is None


def test_an_fma_rate_far_below_the_vector_rate_doubts_the_fma_rate():
    doubt = rate_doubt(_spec(vector=300e9, matmul=100e9))
    assert doubt is not None and doubt[0] == "matmul_rate"


@pytest.mark.parametrize(
    ("arch", "isa"),
    [(None, AVX2), ("riscv64", ()), ("x86_64", ())],
    ids=["no-arch", "riscv", "no-isa"],
)
def test_nothing_is_assumed_where_the_isa_was_not_detected(arch, isa):
    assert rate_doubt(_spec(vector=400e9 / 7, arch=arch, isa=isa)) is None


def test_a_matmul_ceiling_raised_to_a_library_is_compared_as_measured():
    """MKL's AVX-512 sgemm may reach 3x an FMA ceiling built for AVX2 (ACCELOPT_CPU_TARGET)."""
    raised = _spec(vector=100e9, matmul=600e9, library_scale={"matmul_rate": 3.0})
    assert rate_doubt(raised) is None  # 100 of the micro-benchmark's 200: half, as it should be


# -- a first measurement that finds them: provisional ----------------------------------------------


@pytest.fixture
def fake_cpu(monkeypatch):
    """measure_cpu on fake micro-benchmarks: a quiet machine whose rounds agree, the figures a
    test chooses (no compiler, no real run)."""
    rates = {"matmul_rate": 400e9, "vector_rate": 200e9, "bandwidth": 40e9}

    def measure(ceilings, threads, compiler):
        figures = {c: Figure(rates[c], 0.01, f"measured: {c}", 0.01) for c in ceilings}
        return Measurement(figures, QUIET)

    monkeypatch.setattr(cpu_spec, "measure_figures", measure)
    monkeypatch.setattr(cpu_spec, "find_compiler", lambda: Compiler(("cc",), "fakecc 1.0"))
    monkeypatch.setattr(cpu_spec, "machine_isa", lambda compiler: Isa("x86_64", AVX2, 256, ()))
    monkeypatch.setattr(cpu_spec, "cache_levels", lambda: [])
    return rates


def test_a_measurement_whose_vector_rate_is_a_seventh_of_fma_is_provisional(fake_cpu):
    assert not cpu_spec.measure_cpu(2).provisional
    fake_cpu["vector_rate"] = 400e9 / 7  # the busy VM
    spec = cpu_spec.measure_cpu(2)
    assert spec.provisional
    assert spec.confidence["vector_rate"] is Confidence.UNSURE
    assert spec.doubts and spec.doubts[-1].startswith("vector rate 1/7 of the FMA rate")
