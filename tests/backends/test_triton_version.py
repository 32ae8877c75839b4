"""The triton backend's preflight refuses a Triton too old for the settings the worker makes
through ``triton.knobs`` (a CUDA machine may bring its own Triton)."""

from __future__ import annotations

import importlib.metadata

import pytest

from accelopt.backends.triton import environment
from accelopt.errors import UserError

pytest.importorskip("triton")
pytest.importorskip("torch")


VERSIONS = [
    ("3.1.0", False),
    ("3.3.1", False),
    ("3.4.0", True),
    ("3.9+g1", True),
    ("4.0", True),
]


@pytest.mark.parametrize(("installed", "ok"), VERSIONS)
def test_preflight_needs_a_triton_with_knobs(monkeypatch, installed, ok):
    monkeypatch.setattr(importlib.metadata, "version", lambda name: installed)
    if ok:
        environment.require_packages()
        return
    with pytest.raises(UserError, match=r"needs Triton 3\.4 or later .* has 3\.\d"):
        environment.require_packages()
