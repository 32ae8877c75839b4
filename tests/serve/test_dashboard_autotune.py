"""The dashboard's autotune view: an autotune run's variant table (each tunable's value, status,
latency with its interval, the peak and % of peak against the cached ceilings) and its
sensitivity plot, in the live JSON and in real headless Chromium (with a screenshot); and the
progress chart's candidates with their intervals, under a line said to be the committed best.
The run is written straight into a store (tests/reports/tuned_run.py): nothing is timed."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_server import dashboard_over

sys.path.append(str(Path(__file__).parents[1] / "reports"))

from browser_support import dump_dom, needs_chromium, screenshot
from report_helpers import make_fake_run
from tuned_run import RUN, cached_peak_s, make_tuned_run

from accelopt.reports.run_report import load_run
from accelopt.serve.dashboard import live_figures, live_json
from accelopt.store.store import Store

pytest.importorskip("fastapi")


TOKEN = "autotune-t0ken-0123456789"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with Store.open(tmp_path_factory.mktemp("ws")) as opened:
        make_tuned_run(opened)
        make_fake_run(opened)
        yield opened


@pytest.fixture(scope="module")
def base(store: Store, serve_in_thread) -> Iterator[str]:
    with dashboard_over(store, TOKEN, serve_in_thread) as url:
        yield url


def test_the_live_json_has_the_variant_table_against_one_peak(store: Store):
    live = live_figures(load_run(store, store.get_run(RUN)))  # type: ignore[arg-type]
    json.dumps(live, allow_nan=False)
    (tuned,) = live["variants"]
    assert tuned["kernel_hash"] == "base" and tuned["tunables"] == ["BM", "UNROLL"]
    rows = tuned["rows"]
    assert rows[0]["as_written"] and rows[0]["values"] == {"BM": "64", "UNROLL": "1"}
    assert len(rows) == 9 and {r["status"] for r in rows} >= {"raced: slower", "COMPILE_ERROR"}
    timed = [r for r in rows if r["latency_s"]]
    for r in timed:  # one ceiling: the cached one, shown in every row
        assert r["peak_s"] == pytest.approx(cached_peak_s())
        assert r["pct"] == pytest.approx(r["peak_s"] / r["latency_s"])
        assert r["ci_low_s"] < r["latency_s"] < r["ci_high_s"]
    kept = next(r for r in rows if r["kept"])
    assert kept["values"] == {"BM": "128", "UNROLL": "2"} and kept["speedup"] > 1
    panels = {p["tunable"]: p for p in tuned["sensitivity"]}
    assert panels["BM"]["values"] == ["32", "64", "128"]
    assert panels["UNROLL"]["values"] == ["1", "2", "4"]
    assert len(panels["BM"]["points"]) == len(timed) and panels["BM"]["untimed"] == 2


def test_the_candidates_carry_their_interval_and_the_best_line_is_the_committed_best(
    store: Store,
):
    live = live_figures(load_run(store, store.get_run(RUN)))  # type: ignore[arg-type]
    timed = [c for c in live["candidates"] if c["pct"] is not None]
    assert timed and all(c["low"] < c["pct"] < c["high"] for c in timed)
    best = live["best_curve"][-1]["pct"]
    assert best == pytest.approx(cached_peak_s() / 5.44e-3)  # the kept variant's own point
    assert best in [c["pct"] for c in timed]


def test_a_run_without_variants_has_none(store: Store):
    assert live_json(store, "fakerun00001")["variants"] == []  # type: ignore[index]


@pytest.mark.browser
@needs_chromium
def test_chromium_shows_the_autotune_view(base: str, tmp_path: Path):
    url = f"{base}/runs/{RUN}#token={TOKEN}"
    dom = dump_dom(url)
    assert 'data-state="ok"' in dom and 'data-variants="9"' in dom
    view = dom.split('id="variants-section"')[1].split("</section>")[0]
    assert "hidden" not in view.split(">")[0]
    assert '<tr class="as-written" data-hash="base">' in view
    assert "<th>BM</th><th>UNROLL</th>" in view and "re-timed speedup" in view
    assert view.count('class="variant-point"') == 2 * 7  # 7 timed rows, on 2 panels
    assert 'data-tunable="BM"' in view and 'data-tunable="UNROLL"' in view
    assert view.count('class="interval"') == 2 * 7
    assert 'data-kind="kept"' in view and 'data-kind="written"' in view
    progress = dom.split('<section id="progress">')[1].split("</section>")[0]
    assert "committed best" in progress and 'class="interval"' in progress
    other = dump_dom(f"{base}/runs/fakerun00001#token={TOKEN}")
    assert 'data-state="ok"' in other and 'data-variants="0"' in other
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        png = screenshot(url, tmp_path / "dashboard-autotune.png", Path(profile),
                         (1200, 2600), budget_ms=4000)  # fmt: skip
    assert png.stat().st_size > 10_000
