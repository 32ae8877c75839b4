"""The model report: one self-contained HTML page of what ``accelopt model optimize`` found, and
the figures the terminal tables share with it (``cli/model_tables.py``): the Amdahl bound, a
site's share of eager time, the output check as one line.

The page is ``templates/model_report.jinja``, which extends the reports' ``base.jinja`` (one
house style), rendered strict and auto-escaped: every label, reason and advice comes from the
user's model and is text, never markup. The chart arrives as SVG from ``plots.py``.
"""

from __future__ import annotations

import datetime
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jinja2
from markupsafe import Markup

from accelopt import __version__, formatting, templating
from accelopt.model.plots import time_bars
from accelopt.model.records import ModelResult, Share, Site, Speedup, Timed

ACCELOPT = "accelopt"
SHOWN_NAMES = {"eager": "eager", "inductor": "torch.compile (Inductor)", ACCELOPT: "accelopt"}
SWAPPED = "swapped"


# -- figures shared with the terminal tables ---------------------------------------------------


def amdahl(before: Sequence[Share], swapped_sites: set[str]) -> tuple[float, float]:
    """The share of eager time that no swapped kernel covers (``before``'s shares of the sites
    not in ``swapped_sites``, and whatever ``before`` does not attribute), and the best
    end-to-end speedup were every swapped kernel to take no time at all: 1 / that share
    (infinite when the kernels cover everything)."""
    covered = sum(s.share for s in before if s.site and s.site in swapped_sites)
    uncovered = min(1.0, max(0.0, 1.0 - covered))
    return uncovered, (1.0 / uncovered if uncovered > 0 else math.inf)


def predicted(result: ModelResult) -> float | None:
    """Amdahl's law with the kernels as measured: eager time with each swapped site's share
    divided by its kernel's speedup over the subgraph it replaced, the rest unchanged; None
    when a swapped site has no measured speedup."""
    rest, sites = 1.0, [s for s in result.sites if s.status == SWAPPED]
    for site in sites:
        if site.speedup is None or site.speedup.ratio <= 0:
            return None
        share = site_share(result.before, site.id) or 0.0
        rest += share / site.speedup.ratio - share
    return 1.0 / rest if sites and rest > 0 else None


def swapped_sites(result: ModelResult) -> set[str]:
    """The ids of the sites whose kernels run in the compiled model."""
    return {s.id for s in result.sites if s.status == SWAPPED}


def site_share(before: Sequence[Share], site: str) -> float | None:
    """A site's share of eager time: its entries in ``before``, summed; None when the profile
    timed none (a near miss, whose nodes belong to other parts)."""
    shares = [s.share for s in before if s.site == site]
    return sum(shares) if shares else None


def accelopt_gain(result: ModelResult) -> float | None:
    """accelopt's speedup over the better of eager and Inductor (the smaller of its speedups
    over them); None when none was timed."""
    ratios = [s.ratio for s in result.speedups if s.candidate == ACCELOPT]
    return min(ratios) if ratios else None


def speedup_over(result: ModelResult, baseline: str) -> Speedup | None:
    """accelopt's speedup over ``baseline``, as timed; None where it was not."""
    found = [s for s in result.speedups if s.candidate == ACCELOPT and s.baseline == baseline]
    return found[0] if found else None


def half_width(t: Timed) -> float | None:
    """The 95 % interval of a median, as a relative half-width (0.02: +- 2 %)."""
    return (t.high_ms - t.low_ms) / (2 * t.ms) if t.ms > 0 else None


def check_line(check: dict[str, float | bool | str]) -> str:
    """The output check as one sentence: the largest error against eager, the tolerance, and
    the verdict; other keys as ``key: value``."""
    if not check:
        return "outputs not checked against eager"
    parts = []
    if "max_abs_err" in check:
        parts.append(f"max abs err {_value(check['max_abs_err'])}")
    if "tolerance" in check:
        parts.append(f"tolerance {_value(check['tolerance'])}")
    known = {"max_abs_err", "tolerance", "passed"}
    parts += [
        f"{key.replace('_', ' ')} {_value(v)}" for key, v in check.items() if key not in known
    ]
    verdict = ""
    if "passed" in check:
        verdict = "passed" if check["passed"] else "FAILED"
    body = ", ".join(parts)
    return "outputs against eager: " + ": ".join(p for p in (body, verdict) if p)


def _value(value: float | bool | str) -> str:
    if isinstance(value, bool) or not isinstance(value, float | int):
        return str(value)
    return formatting.scientific(float(value))


def sizes_text(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def amdahl_sentence(
    result: ModelResult, times: Callable[[float | None], str] = formatting.speedup_x
) -> str:
    """What the swapped kernels could give at best: their cover of eager time and the bound
    (``times`` writes it: ``1.23x`` in the terminal, ``1.23×`` on a page)."""
    uncovered, bound = amdahl(result.before, swapped_sites(result))
    cover = f"the kernels cover {formatting.percent(1 - uncovered, ' %')} of eager time"
    expected = predicted(result)
    measured = (
        f"; at their measured speedups Amdahl's law gives {times(expected)} over eager"
        if expected is not None
        else ""
    )
    if math.isinf(bound):
        return f"{cover}: nothing else bounds the model's speedup{measured}"
    return (
        f"{cover}; even at zero time they could make the model at most {times(bound)} faster"
        f"{measured}"
    )


# -- the page ----------------------------------------------------------------------------------


@functools.cache
def _environment() -> jinja2.Environment:
    env = templating.environment("accelopt.model", kind="html")
    env.loader = jinja2.ChoiceLoader(
        [env.loader, jinja2.PackageLoader("accelopt.reports", "templates")]  # type: ignore[list-item]
    )
    env.filters.update(
        ms=lambda ms: formatting.latency(None if ms is None else ms / 1e3),
        pct=formatting.percent,
        speedup=formatting.speedup,
    )
    return env


def _ratio_text(s: Speedup | None) -> str:
    if s is None:
        return formatting.DASH
    return f"{formatting.speedup(s.ratio)} ({s.low:.2f}–{s.high:.2f})"


def _end_to_end(result: ModelResult) -> list[dict[str, Any]]:
    rows = []
    for t in result.timings:
        versus = None if t.name == ACCELOPT else speedup_over(result, t.name)
        rows.append(
            {
                "name": SHOWN_NAMES.get(t.name, t.name),
                "t": t,
                "pm": half_width(t),
                "speedup": _ratio_text(versus) if t.name != ACCELOPT else "",
            }
        )
    return rows


def _site_rows(result: ModelResult) -> list[dict[str, Any]]:
    return [
        {
            "site": s,
            "sizes": sizes_text(s.sizes),
            "share": site_share(result.before, s.id),
            "state": _state(s),
            "speedup": _ratio_text(s.speedup),
        }
        for s in result.sites
    ]


def _state(site: Site) -> str:
    return f"{site.status}: {site.reason}" if site.reason else site.status


def render_html(result: ModelResult) -> str:
    """The model report as one self-contained HTML page."""
    uncovered, bound = amdahl(result.before, swapped_sites(result))
    generated = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = _environment().get_template("model_report.jinja")
    return page.render(
        version=__version__,
        generated=generated,
        title=f"accelopt model: {result.model}",
        result=result,
        inputs=["×".join(str(d) for d in shape) or "scalar" for shape in result.inputs],
        end_to_end=_end_to_end(result),
        check=check_line(result.check),
        check_passed=result.check.get("passed"),
        sites=_site_rows(result),
        covered=1 - uncovered,
        bound=None if math.isinf(bound) else bound,
        amdahl=amdahl_sentence(result, formatting.speedup),
        plot=Markup(time_bars(result.before, result.after)),
    )
