"""The backend registry: one record per backend, classes loaded lazily, so that
``backends.base`` (which every backend imports) imports none of them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from accelopt.backends import base, registry
from accelopt.backends.base import backend_class, get_backend
from accelopt.backends.kernel import normalize_source, source_suffix
from accelopt.backends.registry import BackendRecord, Language, Runs
from accelopt.backends.tunables import language_of
from accelopt.errors import UserError
from accelopt.export import runtime
from accelopt.hardware.spec import GPU_BACKEND, HOST_BACKEND

NAMES = ("cpu", "triton", "numpy", "torch", "inductor", "max-autotune")


def test_every_registered_backend_loads_under_its_name() -> None:
    assert registry.names() == NAMES
    for name in NAMES:
        backend = get_backend(name)
        assert backend.name == name
        assert isinstance(backend, backend_class(name))
        assert get_backend(name) is not backend  # a new instance each time


def test_an_unknown_backend_is_a_user_error_naming_the_known_ones() -> None:
    with pytest.raises(UserError) as raised:
        get_backend("fpga")
    assert str(raised.value) == (
        "unknown backend 'fpga'; the available backends are: cpu, triton, numpy, torch, inductor, "
        "max-autotune"
    )
    assert raised.value.__context__ is None and raised.value.__cause__ is None


def test_what_the_tree_reads_of_a_backend_comes_from_its_record() -> None:
    assert registry.DEFAULT_BACKEND == "cpu"
    assert registry.reference_kinds() == ("numpy", "torch", "inductor", "max-autotune")
    assert registry.hardware_backends() == ("cpu", "triton")
    assert registry.kernel_backends() == ("cpu", "triton")
    assert [source_suffix(n) for n in ("cpu", "triton", "nki")] == [".c", ".py", ".txt"]
    assert [language_of(n) for n in ("cpu", "triton", "numpy")] == ["c", "python", "python"]
    assert registry.record("cpu").shipped_name("expert") == "expert.c"
    assert registry.record("triton").shipped_name("baseline") == "baseline_triton.py"
    assert registry.needs_serve_opt_in(" Triton ") and not registry.needs_serve_opt_in("cpu")
    # a comment is dropped by the record's language: "#" is a comment in Python only
    assert normalize_source("x = 1  # note", "triton") == normalize_source("x = 1", "triton")
    assert normalize_source("#define N 4", "cpu") == "#define N 4"


def test_the_names_other_layers_hold_are_records_of_the_right_kind() -> None:
    """hardware/ stamps its specs with these names; export/runtime.py (which imports nothing of
    accelopt) reads the loader a record writes into the manifest."""
    assert registry.record(HOST_BACKEND).runs is Runs.HOST
    assert registry.record(GPU_BACKEND).runs is Runs.GPU
    assert registry.record(GPU_BACKEND).loader == runtime.TRITON_MODULE


def test_a_new_backend_is_one_record(monkeypatch: pytest.MonkeyPatch) -> None:
    record = BackendRecord("numpy2", "accelopt.backends.numpy.backend:NumpyBackend", Language.C)
    monkeypatch.setattr(registry, "_plugins", lambda: ((record,), {}))
    assert get_backend("numpy2").name == "numpy"
    assert source_suffix("numpy2") == ".c"
    assert registry.names()[-1] == "numpy2"


def test_a_plugin_cannot_shadow_a_built_in_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = BackendRecord("cpu", "accelopt.backends.numpy.backend:NumpyBackend", Language.PYTHON)
    monkeypatch.setattr(registry, "_plugins", lambda: ((fake,), {}))
    assert registry.record("cpu").language is Language.C


def _points(monkeypatch: pytest.MonkeyPatch, *points: SimpleNamespace) -> None:
    monkeypatch.setattr(registry.importlib.metadata, "entry_points", lambda group: list(points))
    registry._plugins.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_plugins() -> Iterator[None]:
    registry._plugins.cache_clear()
    yield
    registry._plugins.cache_clear()


def test_a_broken_entry_point_stops_only_what_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def fails() -> object:
        raise ImportError("no module named numpylang")

    _points(
        monkeypatch,
        SimpleNamespace(name="x", value="pkg:NOT_A_RECORD", load=lambda: object()),
        SimpleNamespace(name="numpylang", value="numpylang:RECORD", load=fails),
    )
    assert registry.names() == NAMES  # every other command goes on
    with pytest.raises(UserError, match=r"'x' .* is not a BackendRecord of that name: fix or"):
        registry.record("x")
    with pytest.raises(UserError, match=r"cannot be imported .ImportError: no module named"):
        get_backend("numpylang")


def test_importing_the_base_imports_no_backend() -> None:
    code = (
        "import sys; import accelopt.backends.base, accelopt.backends;"
        "print(sorted(m for m in sys.modules if m.startswith('accelopt.backends.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    for name in NAMES:
        assert f"accelopt.backends.{name}" not in out, out
    assert base.__name__ in out


def test_a_reference_kind_is_no_kernel_language_to_evaluate_a_file_in() -> None:
    """numpy times the problem's own reference: `accelopt eval FILE --backend numpy` would time
    that, not the file, so it is refused in one sentence naming the kernel backends."""
    from accelopt import views

    with pytest.raises(UserError, match=r"unknown backend 'numpy'; .* are: cpu, triton$"):
        views.hardware_for("numpy", None)


def test_a_built_in_backend_is_found_without_loading_other_distributions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every process (the worker's too) reads the cpu record to hash a kernel: no other
    distribution's entry point is loaded for it."""

    def loaded() -> object:
        raise AssertionError("an entry point was loaded")

    _points(monkeypatch, SimpleNamespace(name="slow", value="slow:RECORD", load=loaded))
    assert registry.record("cpu").language is Language.C and registry.known("triton") is not None
