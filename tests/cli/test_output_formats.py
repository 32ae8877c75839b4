"""``accelopt.formatting``: every figure is written byte for byte as the CLI's tables
(``cli/output.py``, ``cli/optimize.py``), the report pages (``reports/html.py``), the agents'
profiles (``profiling/profile.py``) and the progress line wrote it before the formats moved there,
None, NaN and infinities included."""

from __future__ import annotations

import math
import random

import pytest

from accelopt import formatting as f

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("seconds", "cli", "page", "brief"),
    [
        (None, "—", "—", None),
        (0.0, "0.000", "0.0 µs", "0 ms"),
        (5e-5, "0.05000", "50.0 µs", "0.05 ms"),
        (1.532e-5, "0.01532", "15.3 µs", "0.01532 ms"),
        (1.571e-5, "0.01571", "15.7 µs", "0.01571 ms"),
        (1e-4, "0.1000", "0.100 ms", "0.1 ms"),
        (1.893e-3, "1.893", "1.893 ms", "1.893 ms"),
        (0.25, "250.000", "250.000 ms", "250 ms"),
        (1.2345, "1234.500", "1234.500 ms", "1,234 ms"),
        (2.5e-7, "0.000250", "0.2 µs", "0.00025 ms"),
        (NAN, "nan", "nan ms", "nan ms"),
        (INF, "inf", "inf ms", "inf ms"),
        (-INF, "-inf", "-inf µs", "-inf ms"),
    ],
)
def test_latencies(seconds, cli, page, brief):
    assert f.milliseconds(seconds) == cli
    assert f.milliseconds(seconds, " ms") == (cli if seconds is None else f"{cli} ms")
    assert f.latency(seconds) == page
    if brief is not None:
        assert f.latency_brief(seconds) == brief


@pytest.mark.parametrize(
    ("fraction", "plain", "spaced"),
    [
        (None, "—", "—"),
        (0.0, "0.0%", "0.0 %"),
        (0.1234, "12.3%", "12.3 %"),
        (0.05, "5.0%", "5.0 %"),
        (1.5, "150.0%", "150.0 %"),
        (-0.001, "-0.1%", "-0.1 %"),
        (NAN, "nan%", "nan %"),
        (INF, "inf%", "inf %"),
        (-INF, "-inf%", "-inf %"),
    ],
)
def test_percentages(fraction, plain, spaced):
    assert f.percent(fraction) == plain
    assert f.percent(fraction, " %") == spaced


@pytest.mark.parametrize(
    ("ratio", "page", "cli"),
    [
        (None, "—", "—"),
        (0.0, "0.00×", "—"),  # the CLI wrote a ratio of 0 as none known
        (1.0, "1.00×", "1.00x"),
        (2.345, "2.35×", "2.35x"),
        (NAN, "nan×", "nanx"),
        (INF, "inf×", "infx"),
    ],
)
def test_speedups(ratio, page, cli):
    assert f.speedup(ratio) == page
    assert f.speedup_x(ratio) == cli


@pytest.mark.parametrize(
    ("amount", "page", "column"),
    [
        (None, "unknown", None),
        (0, "$0.0000", "0.0000"),
        (0.0, "$0.0000", "0.0000"),
        (0.123456, "$0.1235", "0.1235"),
        (12.5, "$12.5000", "12.5000"),
        (NAN, "$nan", "nan"),
        (INF, "$inf", "inf"),
    ],
)
def test_dollars(amount, page, column):
    assert f.usd(amount) == page
    if column is not None:
        assert f.usd_plain(amount) == column


def test_rates_counts_and_errors():
    assert f.giga(None, "FLOP/s") == "—"
    assert f.giga(1.2345e12, "FLOP/s") == "1,234.5 GFLOP/s"
    assert f.giga(2.5e10, "B/s") == "25.0 GB/s"
    assert f.giga(NAN, "B/s") == "nan GB/s" and f.giga(INF, "B/s") == "inf GB/s"
    assert [f.giga_brief(v) for v in (1.2345e12, 1e10, 2.5e9, 1.23e7, NAN, INF)] == [
        "1,234.5", "10.0", "2.5", "0.0123", "nan", "inf"
    ]  # fmt: skip
    assert [f.integer(v) for v in (None, 0, 12345, 12345.9)] == ["—", "0", "12,345", "12,345"]
    assert [f.scientific(v) for v in (None, 0.0, 4e-7, NAN, INF)] == [
        "—", "0.0e+00", "4.0e-07", "nan", "inf"
    ]  # fmt: skip


def _ms_digits(s: float) -> str:
    """Milliseconds since issue 46 (defect 17): 3 decimals from 1 ms, 4 significant digits below
    (at most 6 decimals); before, always 3, which could not tell 15 µs kernels apart."""
    ms = s * 1e3
    small = math.isfinite(ms) and ms != 0 and abs(ms) < 1
    return f"{ms:.{min(6, 3 - math.floor(math.log10(abs(ms)))) if small else 3}f}"


# The expressions each place wrote before the formats moved, verbatim (milliseconds since 46).
OLD = {
    "cli ms": lambda s: "—" if s is None else _ms_digits(s),
    "cli pct": lambda x: "—" if x is None else f"{x * 100:.1f}%",
    "cli speedup": lambda r: f"{r:.2f}x" if r else "—",
    "cli $": lambda u: f"{u:.4f}",
    "rel err": lambda e: "—" if e is None else f"{e:.1e}",
    "page ms": lambda s: (
        "—" if s is None else (f"{s * 1e6:.1f} µs" if s < 1e-4 else f"{s * 1e3:.3f} ms")
    ),
    "page speedup": lambda r: "—" if r is None else f"{r:.2f}×",
    "page usd": lambda u: "unknown" if u is None else f"${u:.4f}",
    "page rate": lambda v: "—" if v is None else f"{v / 1e9:,.1f} GFLOP/s",
    "ceiling": lambda v: f"{v / 1e9:,.1f} GB/s",
    "profile ms": lambda s: f"{s * 1e3:.4g} ms" if s * 1e3 < 1000 else f"{s * 1e3:,.0f} ms",
    "profile rate": lambda v: f"{v / 1e9:,.1f}" if v / 1e9 >= 10 else f"{v / 1e9:.3g}",
    "profile pct": lambda x: f"{x * 100:.1f} %",
    "progress ms": lambda s: "—" if s is None else f"{_ms_digits(s)} ms",
    "progress pct": lambda x: "—" if x is None else f"{x:.1%}",
    "progress $": lambda u: f"${u:.4f}",
}
NEW = {
    "cli ms": f.milliseconds,
    "cli pct": f.percent,
    "cli speedup": f.speedup_x,
    "cli $": f.usd_plain,
    "rel err": f.scientific,
    "page ms": f.latency,
    "page speedup": f.speedup,
    "page usd": f.usd,
    "page rate": lambda v: f.giga(v, "FLOP/s"),
    "ceiling": lambda v: f.giga(v, "B/s"),
    "profile ms": f.latency_brief,
    "profile rate": f.giga_brief,
    "profile pct": lambda x: f.percent(x, " %"),
    "progress ms": lambda s: f.milliseconds(s, " ms"),
    "progress pct": f.percent,
    "progress $": f.usd,
}
NO_NONE = {"cli $", "ceiling", "profile ms", "profile rate", "profile pct", "progress $"}


def _values() -> list[float]:
    rng = random.Random(20240601)
    values = [0.0, -0.0, 1e-4, 9.99995e-5, 0.9995, 999.9995, 1e3, 9.995, 0.00095, 0.1235, 0.00045]
    values += [NAN, INF, -INF, 1e-300, 1e300, 5e-324]
    for _ in range(3000):
        values.append(10 ** rng.uniform(-12, 13) * rng.choice((1, 1, 1, -1)))
    return values


@pytest.mark.parametrize("name", sorted(OLD))
def test_each_format_is_the_one_it_replaced(name):
    old, new = OLD[name], NEW[name]
    for value in _values():
        assert new(value) == old(value), (name, value)
    if name not in NO_NONE:
        assert new(None) == old(None)
