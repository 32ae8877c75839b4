"""How figures are written for people: the CLI's tables, the report pages and the agents' profiles.

Every format that more than one place shows lives here, so that a latency, a percentage or a sum
of dollars reads the same wherever it appears. The functions are pure. Where a caller can lack a
figure they take None and write ``DASH`` (``usd`` writes "unknown": a price nobody knows). NaN
and infinity are written as Python formats them (``nan``, ``inf``), never hidden.

The formats, by where they are shown:

- latency: ``milliseconds`` (the CLI's ``ms`` columns: ``1.235``; the progress line: ``1.235 ms``),
  ``latency`` (the report pages: ``12.3 µs`` below 0.1 ms, else ``1.235 ms``), ``latency_brief``
  (the agents' profiles: 4 significant digits, ``1.893 ms``);
- a fraction as a percentage to a tenth: ``percent`` (``12.3%``; the profiles' ``12.3 %``);
- a speedup: ``speedup`` (pages: ``1.23×``), ``speedup_x`` (the CLI: ``1.23x``);
- dollars: ``usd`` (``$0.1234``), ``usd_plain`` (the CLI's ``$`` columns: ``0.1234``);
- rates in giga-units: ``giga`` (``1,234.5 GFLOP/s``), ``giga_brief`` (the profiles: ``12.3``),
  ``achieved`` (the CLI's achieved column: ``395.1 GFLOP/s``, ``42.3 GB/s``, by the bound);
- counts and errors: ``integer`` (``12,345``), ``scientific`` (``4.0e-07``).
"""

from __future__ import annotations

import math

DASH = "—"  # a figure that is not known (not measured, not timed, failed)

GIGA = 1e9


def milliseconds(seconds: float | None, unit: str = "") -> str:
    """A time in milliseconds: ``1.235`` (a column whose header names the unit), or ``1.235 ms``
    with ``unit=" ms"``; to the microsecond from 1 ms, and to 4 significant digits below it
    (``0.01532``: 3 decimals could not tell 15 µs kernels apart), down to the nanosecond."""
    if seconds is None:
        return DASH
    ms = seconds * 1e3
    return f"{ms:.{_decimals(ms)}f}{unit}"


def _decimals(ms: float) -> int:
    if not math.isfinite(ms) or ms == 0 or abs(ms) >= 1:
        return 3
    return min(6, 3 - math.floor(math.log10(abs(ms))))


def latency(seconds: float | None) -> str:
    """A time with its unit, in µs below 0.1 ms (the small workload: ``12.3 µs``), else in ms
    (``1.235 ms``)."""
    if seconds is None:
        return DASH
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-4 else f"{seconds * 1e3:.3f} ms"


def latency_brief(seconds: float) -> str:
    """A time in ms to 4 significant digits (``1.893 ms``, ``250 ms``), whole from a second on
    (``1,235 ms``): what a prompt needs, and no more."""
    value = seconds * 1e3
    return f"{value:.4g} ms" if value < 1000 else f"{value:,.0f} ms"


def percent(fraction: float | None, unit: str = "%") -> str:
    """A fraction (1.0 = 100 %) as a percentage to a tenth: ``12.3%``; ``unit=" %"`` writes
    ``12.3 %``."""
    return DASH if fraction is None else f"{fraction * 100:.1f}{unit}"


def speedup(ratio: float | None) -> str:
    """A ratio of times to a hundredth, with a times sign: ``1.23×``."""
    return DASH if ratio is None else f"{ratio:.2f}×"


def speedup_x(ratio: float | None) -> str:
    """A ratio of times as the CLI writes it, ``1.23x``; a ratio of 0 (or None) is none
    known."""
    return f"{ratio:.2f}x" if ratio else DASH


def usd(amount: float | None) -> str:
    """Dollars to a hundredth of a cent: ``$0.1234``; None (no price known): ``unknown``."""
    return "unknown" if amount is None else f"${amount:.4f}"


def usd_plain(amount: float) -> str:
    """Dollars in a column headed ``$``: ``0.1234``."""
    return f"{amount:.4f}"


def giga(value: float | None, unit: str) -> str:
    """A rate in giga-units to a tenth, thousands separated: ``giga(1.2345e12, "FLOP/s")`` is
    ``1,234.5 GFLOP/s``."""
    return DASH if value is None else f"{value / GIGA:,.1f} G{unit}"


def giga_brief(value: float) -> str:
    """A rate in giga-units without its unit: to a tenth from 10 on (``1,234.5``), else to 3
    significant digits (``2.5``, ``0.0123``)."""
    scaled = value / GIGA
    return f"{scaled:,.1f}" if scaled >= 10 else f"{scaled:.3g}"


def achieved(per_second: float | None, bound: str) -> str:
    """What a kernel achieved at its roofline bound, in the bound's unit: FLOP/s for ``matmul``
    and ``vector`` (``395.1 GFLOP/s``), bytes/s for ``memory`` (``42.3 GB/s``); to a tenth from 10
    on, else to 3 significant digits, zeros kept (``6.00 GB/s``)."""
    if per_second is None:
        return DASH
    scaled = per_second / GIGA
    digits = f"{scaled:,.1f}" if scaled >= 10 else f"{scaled:#.3g}"
    return f"{digits} {'GB/s' if bound == 'memory' else 'GFLOP/s'}"


def integer(value: int | float | None) -> str:
    """A count, thousands separated (a float is truncated): ``12,345``."""
    return DASH if value is None else f"{int(value):,}"


def scientific(value: float | None) -> str:
    """A small quantity such as a relative error, to 2 significant digits: ``4.0e-07``."""
    return DASH if value is None else f"{value:.1e}"
