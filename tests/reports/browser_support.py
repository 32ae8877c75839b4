"""Headless Chromium for the browser tests (the report, the live dashboard): where it is, the
flags this machine needs (its network is closed: no background connections), and the skip
marker when it is absent. `.ci/run` installs Debian's chromium when it can."""

from __future__ import annotations

import shutil
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
