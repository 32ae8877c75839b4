"""A report opens in a real browser: headless Chromium takes a screenshot of the page (skipped
where Chromium is absent)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from report_helpers import SPEC

from accelopt.reports.run_report import write_run_report
from accelopt.store.store import Store

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


def _chromium() -> str | None:
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    return next(
        (found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))),
        None,
    )


def test_headless_chromium_renders_the_run_report(fake_store: Store, tmp_path):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (looked for /usr/bin/chromium and on PATH)")
    page = write_run_report(tmp_path / "report.html", fake_store,
                            fake_store.get_run("fakerun00001"), SPEC)  # fmt: skip
    png = tmp_path / "shot.png"
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}",
         "--window-size=1200,2400", page.resolve().as_uri()],
        check=True, capture_output=True, timeout=90,
    )  # fmt: skip
    assert png.is_file() and png.stat().st_size > 1000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
