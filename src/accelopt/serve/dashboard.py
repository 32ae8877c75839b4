"""The live dashboard of ``accelopt serve``: the figures of a run while it goes, as JSON, and the
pages that draw them.

``live_figures`` turns what the store holds about a run (``reports.run_report.load_run``) into
the JSON the run's page polls (pure: it goes through ``run_report``, so the page shows the same
numbers as ``accelopt report``); ``live_json`` reads the store and calls it. ``render_page``
fills one of the pages under ``templates/``: they hold no data (the run id from the URL at most),
take the bearer token from the URL's fragment and fetch the JSON with it.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from accelopt import __version__, templating
from accelopt.reports import figures
from accelopt.reports.plots import STATUS_COLORS
from accelopt.reports.run_report import (
    KernelFigures,
    RunData,
    load_run,
    run_report,
)
from accelopt.reports.tuning_view import Sensitivity, TunedKernel, sensitivity
from accelopt.search.spec import RunSpec
from accelopt.store.records import RunStatus
from accelopt.store.store import Store

POLL_MS = 1500  # how often a page asks for new figures while its run goes
IDLE_POLL_MS = 10_000  # ... and once it has ended (it may be resumed)

_ENV = templating.environment("accelopt.serve", kind="html")


def live_json(store: Store, run_id: str) -> dict[str, Any] | None:
    """The live figures of the run ``run_id`` (or a unique prefix); None when there is none."""
    run = store.get_run(run_id)
    return None if run is None else live_figures(load_run(store, run))


def live_figures(data: RunData) -> dict[str, Any]:
    """What the run's page shows, as JSON: its status, the committed best % of peak after each
    iteration, every candidate (its iteration, % of peak with its 95 % interval, and status) and
    the counts by status, the current beam, baseline and best, $ and tokens spent, each tuned
    kernel's variants with their sensitivity to each tunable, and the lessons learned. Every %
    of peak is against the run's cached ceilings (as the report's), a fraction (1.0 = 100 %); a
    number the store does not have (or that is not finite) is null."""
    report = run_report(data, None)
    run = report.run
    candidates = [
        {"iteration": c.iteration, "pct": _finite(c.pct), "status": c.status,
         "low": _finite(c.low), "high": _finite(c.high)}
        for c in report.candidates
    ]  # fmt: skip
    last = data.iterations[-1] if data.iterations else None
    search = RunSpec.of(run).search
    planned = search.iterations if search is not None else None
    cost = report.cost
    return {
        "run": run.id,
        "problem": run.problem,
        "workload": run.workload,
        "backend": run.backend,
        "hardware": run.hardware,
        "strategy": run.strategy,
        "status": run.status,
        "running": run.status == RunStatus.RUNNING,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "iteration": last.iteration if last else None,
        "iterations_planned": planned if isinstance(planned, int) else None,
        "best_curve": [
            {"iteration": iteration, "pct": _finite(pct)} for iteration, pct in report.best_curve
        ],
        "candidates": candidates,
        "evaluated": len(candidates),
        "not_evaluated": report.not_evaluated,
        "by_status": status_counts(c["status"] for c in candidates),
        "beam": beam_rows(data, last.beam if last else ()),
        "baseline": _kernel_json(report.baseline),
        "best": _kernel_json(report.best),
        "cost": {
            "total_usd": _finite(cost.total_usd),
            "unknown_calls": cost.unknown_calls,
            "tokens": cost.tokens,
            "gain_points": _finite(cost.gain_points),
            "usd_per_point": _finite(cost.usd_per_point),
        },
        "variants": [tuned_json(t) for t in report.variants],
        "lessons": [
            {
                "id": e.id,
                "kind": e.kind,
                "title": e.lesson.title,
                "speedup": _finite(e.speedup),
                "iteration": e.iteration,
            }
            for e in report.lessons
        ],
    }


def status_counts(statuses: Any) -> dict[str, int]:
    """How many candidates have each status: the statuses in the report's order (PASSED
    first), then any other, alphabetically."""
    counts = Counter(statuses)
    order = [s for s in STATUS_COLORS if s in counts] + sorted(set(counts) - set(STATUS_COLORS))
    return {s: counts[s] for s in order}


def beam_rows(data: RunData, beam: tuple[str, ...]) -> list[dict[str, Any]]:
    """The kernels of the beam, best first: hash, latency, the peak and % of peak against the
    run's cached ceilings (as every figure of the page), status, and where each came from
    (iteration, origin, plan)."""
    kernels = {k.hash: k for k in data.kernels}
    rows = []
    for kernel_hash in beam:
        e = data.evaluations.get(kernel_hash)
        k = kernels.get(kernel_hash)
        c = figures.cached(e, None) if e else None
        rows.append(
            {
                "hash": kernel_hash,
                "status": e.status.value if e else None,
                "latency_s": _finite(e.latency_s) if e and e.passed else None,
                "peak_s": _finite(c.peak_s) if c else None,
                "pct": _finite(c.pct) if c else None,
                "iteration": k.iteration if k else None,
                "origin": k.origin if k else None,
                "plan": k.plan_title if k else "",
            }
        )
    return rows


def _kernel_json(k: KernelFigures | None) -> dict[str, Any] | None:
    if k is None:
        return None
    return {"hash": k.hash, "status": k.status, "latency_s": _finite(k.latency_s),
            "pct": _finite(k.pct), "speedup": _finite(k.speedup), "bound": k.bound,
            "peak_s": _finite(k.peak_s), "ci_low_s": _finite(k.ci_low_s),
            "ci_high_s": _finite(k.ci_high_s), "achieved": _finite(k.achieved),
            "unit": k.unit}  # fmt: skip


def tuned_json(t: TunedKernel) -> dict[str, Any]:
    """A tuned kernel's variant table and its sensitivity plot's data, as the page draws them:
    every % of peak against the cached ceilings, its peak beside it (``reports.tuning_view``)."""
    return {
        "kernel_hash": t.kernel_hash,
        "iteration": t.iteration,
        "tunables": list(t.tunables),
        "rows": [_finite_all(dataclasses.asdict(r)) for r in t.rows],
        "sensitivity": [_sensitivity_json(s) for s in sensitivity(t)],
    }


def _sensitivity_json(s: Sensitivity) -> dict[str, Any]:
    points = [_finite_all(dataclasses.asdict(p)) for p in s.points]
    return {"tunable": s.tunable, "values": list(s.values), "untimed": s.untimed, "points": points}


def _finite_all(record: dict[str, Any]) -> dict[str, Any]:
    return {k: _finite(v) if isinstance(v, float) else v for k, v in record.items()}


def _finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: such a number is null."""
    return value if value is not None and math.isfinite(value) else None


# -- the pages --------------------------------------------------------------------------------


def render_page(template: str, nonce: str, **context: Any) -> str:
    """``templates/<template>.jinja`` filled in (escaped); ``nonce``: the one the page's script
    carries and its Content-Security-Policy names."""
    page = _ENV.get_template(f"{template}.jinja")
    return page.render(
        version=__version__, nonce=nonce, poll_ms=POLL_MS, idle_poll_ms=IDLE_POLL_MS,
        status_colors=STATUS_COLORS, **context,
    )  # fmt: skip


def content_security_policy(nonce: str) -> str:
    """Only the page's own inline style and script (by nonce), fetches to its own origin."""
    return (
        "default-src 'none'; "
        f"script-src 'nonce-{nonce}'; "
        "style-src 'unsafe-inline'; "
        "connect-src 'self'; "
        "img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def page_headers(nonce: str) -> Mapping[str, str]:
    return {
        "Content-Security-Policy": content_security_policy(nonce),
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
    }
