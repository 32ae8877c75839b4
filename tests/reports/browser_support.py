"""Headless Chromium for the browser tests (the report, the live dashboard): where it is, the
flags this machine needs (its network is closed: no background connections), and the skip
marker when it is absent. `.ci/run` installs Debian's chromium when it can."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


def _chromium() -> str | None:
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    return next(
        (found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))),
        None,
    )


CHROMIUM = _chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (looked for /usr/bin/chromium and on PATH)"
)
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage")  # fmt: skip

# Screenshots are written under the test's tmp path; a copy also goes here where this folder
# exists (made by whoever wants to look at them; nothing is written otherwise).
SHOTS_COPY = Path("/tmp/w/shots")


def screenshot(
    url: str, png: Path, profile: Path, size: tuple[int, int] = (1200, 2400), budget_ms: int = 0
) -> Path:
    """A PNG of the page at ``url`` (after ``budget_ms`` of virtual time for its scripts and
    fetches, where it has any), and its copy in ``SHOTS_COPY`` where that folder exists."""
    assert CHROMIUM is not None
    budget = [f"--virtual-time-budget={budget_ms}"] if budget_ms else []
    done = subprocess.run(
        [CHROMIUM, *BROWSER_FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
         f"--window-size={size[0]},{size[1]}", "--hide-scrollbars", *budget, url],
        capture_output=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if SHOTS_COPY.is_dir():
        shutil.copyfile(png, SHOTS_COPY / png.name)
    return png


def dump_dom(url: str, budget_ms: int = 4000) -> str:
    """The page's DOM after its script ran (and fetched) for ``budget_ms`` of virtual time."""
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        done = subprocess.run(
            [CHROMIUM, *BROWSER_FLAGS, f"--user-data-dir={profile}",
             f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
            capture_output=True, text=True, timeout=90,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
