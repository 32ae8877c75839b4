"""How far measured ceilings can be trusted: the spread of a run's repeats, how far runs
disagree, and when a measurement is provisional."""

import pytest

from accelopt.hardware.figures import Figure, Measurement, Rounds, Sample, disagreement, spread
from accelopt.hardware.load import Load


def test_spread():
    assert spread(100.0, 90.0) == pytest.approx(0.1)  # best, median
    assert spread(100.0, 100.0) == 0.0
    assert spread(0.0, 0.0) == 0.0


def _figures(**spreads: float) -> dict[str, Figure]:
    return {name: Figure(1e10, value, "measured: test") for name, value in spreads.items()}


def test_a_wide_spread_makes_a_measurement_provisional():
    quiet = Load(loadavg=0.1, running=1, cpus=2, steal=0.0)
    calm = Measurement(_figures(matmul_rate=0.02, bandwidth=0.1), quiet)
    assert not calm.provisional
    assert calm.describe().startswith("quiet during the measurement (load average 0.10")
    noisy = Measurement(_figures(matmul_rate=0.3, bandwidth=0.1), quiet)
    assert noisy.provisional
    assert noisy.reasons == ("matmul_rate repeats spread 30% (a quiet machine: under 10%)",)
    assert noisy.describe().startswith("provisional, measured while the machine was busy: ")


def test_a_busy_machine_makes_a_measurement_provisional():
    busy = Load(loadavg=0.1, running=1, cpus=2, steal=0.2)  # the hypervisor took a fifth
    measured = Measurement(_figures(bandwidth=0.01), busy)
    assert measured.reasons == ("the hypervisor stole 20% of the CPU time",)


def test_disagreement():
    assert disagreement([46.2, 26.1, 44.0]) == pytest.approx((46.2 - 26.1) / 46.2)
    assert disagreement([5.0, 5.0]) == 0.0
    assert disagreement([]) == 0.0


def test_rounds_describe_themselves():
    samples = tuple(Sample(v * 1e9, 0.0, "x", at) for v, at in [(1.0, 0.0), (2.0, 1.5)])
    assert Rounds("bandwidth", samples).describe() == "2 rounds over 1.5 s gave 1.0 and 2.0 GB/s"
    assert (
        Rounds("bandwidth", samples, control=True)
        .describe()
        .startswith("1 round and a control over 1.5 s")
    )
