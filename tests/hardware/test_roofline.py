import math

import pytest
from specs import make_spec

from accelopt.hardware import (
    SUSPICIOUS_FRACTION,
    Roofline,
    is_suspicious,
    pct_of_peak,
    roofline,
)
from accelopt.problems.records import Cost

# Round numbers so every term below is exact: 100 FLOP/s matmul, 10 FLOP/s vector, 1000 B/s.
TOY = make_spec(
    name="toy", matmul_rate=100.0, vector_rate=10.0, bandwidth=1000.0, cores=1, llc_bytes=None
)


def test_matmul_bound():
    # 1000/100 = 10 s, 5/10 = 0.5 s, 2000/1000 = 2 s
    r = roofline(Cost(matmul_flops=1000, vector_flops=5, bytes=2000), TOY)
    assert r == Roofline(peak_s=10.0, bound="matmul", matmul_s=10.0, vector_s=0.5, memory_s=2.0)


def test_vector_bound():
    # 100/100 = 1 s, 50/10 = 5 s, 1000/1000 = 1 s
    r = roofline(Cost(matmul_flops=100, vector_flops=50, bytes=1000), TOY)
    assert (r.bound, r.peak_s) == ("vector", 5.0)
    assert (r.matmul_s, r.vector_s, r.memory_s) == (1.0, 5.0, 1.0)


def test_memory_bound():
    # 0 s, 0 s, 5000/1000 = 5 s
    r = roofline(Cost(matmul_flops=0, vector_flops=0, bytes=5000), TOY)
    assert (r.bound, r.peak_s) == ("memory", 5.0)


@pytest.mark.parametrize(
    ("cost", "bound"),
    [
        (Cost(matmul_flops=100, vector_flops=10, bytes=1000), "matmul"),  # all three 1 s
        (Cost(matmul_flops=100, vector_flops=0, bytes=1000), "matmul"),  # matmul = memory
        (Cost(matmul_flops=0, vector_flops=10, bytes=1000), "vector"),  # vector = memory
        (Cost(matmul_flops=0, vector_flops=0, bytes=0), "matmul"),  # nothing to do
    ],
)
def test_ties_go_matmul_then_vector_then_memory(cost, bound):
    r = roofline(cost, TOY)
    assert r.bound == bound
    assert r.peak_s == max(r.matmul_s, r.vector_s, r.memory_s)


def test_pct_of_peak_is_a_fraction():
    assert pct_of_peak(1.0, 2.0) == 0.5
    assert pct_of_peak(3.0, 3.0) == 1.0
    assert pct_of_peak(2.0, 1.0) == 2.0


@pytest.mark.parametrize("latency", [0.0, -1.0])
def test_pct_of_peak_rejects_non_positive_latency(latency):
    with pytest.raises(ValueError, match="latency_s"):
        pct_of_peak(1.0, latency)


def test_is_suspicious_threshold():
    assert SUSPICIOUS_FRACTION == 1.05
    assert not is_suspicious(0.5)
    assert not is_suspicious(1.0)
    assert not is_suspicious(1.05)
    assert is_suspicious(math.nextafter(1.05, 2.0))
    assert is_suspicious(1.06)
