"""The backend registry: names to classes, loaded lazily, so that ``backends.base`` (which every
backend imports) imports none of them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from accelopt.backends import base
from accelopt.backends.base import BACKEND_CLASSES, BACKENDS, backend_class, get_backend
from accelopt.errors import UserError


def test_every_registered_backend_loads_under_its_name() -> None:
    assert BACKENDS == ("cpu", "triton", "numpy", "torch", "inductor", "max-autotune")
    assert tuple(BACKEND_CLASSES) == BACKENDS
    for name in BACKENDS:
        backend = get_backend(name)
        assert backend.name == name
        assert isinstance(backend, backend_class(name))
        assert get_backend(name) is not backend  # a new instance each time, as before


def test_an_unknown_backend_is_a_user_error_naming_the_known_ones() -> None:
    with pytest.raises(UserError) as raised:
        get_backend("fpga")
    assert str(raised.value) == (
        "unknown backend 'fpga'; the available backends are: cpu, triton, numpy, torch, inductor, "
        "max-autotune"
    )
    assert raised.value.__context__ is None and raised.value.__cause__ is None


def test_a_new_backend_is_one_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKEND_CLASSES, "numpy2", "accelopt.backends.numpy.backend:NumpyBackend")
    assert get_backend("numpy2").name == "numpy"


def test_importing_the_base_imports_no_backend() -> None:
    code = (
        "import sys; import accelopt.backends.base, accelopt.backends;"
        "print(sorted(m for m in sys.modules if m.startswith('accelopt.backends.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    for name in BACKENDS:
        assert f"accelopt.backends.{name}" not in out, out
    assert base.__name__ in out
