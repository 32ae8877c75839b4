"""A report opens in a real browser: headless Chromium takes a screenshot of the page (an
autotune run's too: its roofline chart, variant table and sensitivity plot) and parses it into
the DOM the report's sections make (skipped where Chromium is absent: Debian's
chromium, at /usr/bin/chromium or on PATH; .ci/run installs it where it can)."""

from __future__ import annotations

import subprocess

import pytest
from browser_support import BROWSER_FLAGS as FLAGS
from browser_support import CHROMIUM, needs_chromium, screenshot
from report_helpers import SPEC
from tuned_run import make_tuned_run

from accelopt.reports.run_report import write_run_report
from accelopt.store.store import Store

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


@needs_chromium
def test_headless_chromium_renders_the_run_report(fake_store: Store, tmp_path):
    assert CHROMIUM is not None
    page = write_run_report(tmp_path / "report.html", fake_store,
                            fake_store.get_run("fakerun00001"), SPEC)  # fmt: skip
    png = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}",
         "--window-size=1200,2400", page.resolve().as_uri()],
        check=True, capture_output=True, timeout=90,
    )  # fmt: skip
    assert png.is_file() and png.stat().st_size > 1000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs_chromium
def test_headless_chromium_parses_every_section_of_the_report(fake_store: Store, tmp_path):
    assert CHROMIUM is not None
    page = write_run_report(tmp_path / "report.html", fake_store,
                            fake_store.get_run("fakerun00001"), SPEC)  # fmt: skip
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         page.resolve().as_uri()],
        check=True, capture_output=True, text=True, timeout=90,
    ).stdout  # fmt: skip
    for section in ("summary", "results", "progress", "lineage", "best-kernel", "diff",
                    "lessons", "failures", "usage"):  # fmt: skip
        assert f'<section id="{section}">' in dom, section
    progress = dom.split('<section id="progress">')[1].split("</section>")[0]
    assert "<svg" in progress  # the chart is inline
    assert "Vectorize &lt;inner&gt; loops" in dom and "<inner>" not in dom


@needs_chromium
def test_a_screenshot_of_an_autotune_runs_report(tmp_path):
    """The roofline chart, the variant table and the sensitivity plot in a real browser (the
    PNG is kept under the test's tmp path, and copied where browser_support.SHOTS_COPY exists)."""
    with Store.open(tmp_path / "ws") as store:
        run = make_tuned_run(store)
        page = write_run_report(tmp_path / "report.html", store, run, SPEC)
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'dom'}", "--dump-dom",
         page.resolve().as_uri()],
        check=True, capture_output=True, text=True, timeout=90,
    ).stdout  # fmt: skip
    for section in ("roofline", "variants", "progress", "results"):
        part = dom.split(f'<section id="{section}">')[1].split("</section>")[0]
        assert "<svg" in part or section == "results", section
    png = screenshot(page.resolve().as_uri(), tmp_path / "report-autotune.png",
                     tmp_path / "profile", (1200, 5200))  # fmt: skip
    assert png.stat().st_size > 10_000
