"""``settings``: the environment variables accelopt reads, each through one function."""

from __future__ import annotations

import pytest

from accelopt import settings


@pytest.mark.parametrize(
    ("value", "on"),
    [(None, False), ("", False), ("0", False), ("1", True), (" Yes ", True), ("on", True)],
)
def test_the_triton_interpreter_is_on_for_a_true_value(monkeypatch, value, on) -> None:
    if value is None:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    else:
        monkeypatch.setenv("TRITON_INTERPRET", value)
    assert settings.triton_interpreter() is on


def test_cuda_visible_devices_keeps_empty_apart_from_unset(monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert settings.cuda_visible_devices() is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert settings.cuda_visible_devices() == ""  # no GPU at all
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert settings.cuda_visible_devices() == "1,0"


def test_openblas_coretype_and_columns_count_only_when_not_empty(monkeypatch) -> None:
    monkeypatch.setenv("OPENBLAS_CORETYPE", "")
    monkeypatch.setenv("COLUMNS", "")
    assert settings.openblas_coretype() is None and not settings.columns_set()
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("COLUMNS", "120")
    assert settings.openblas_coretype() == "Haswell" and settings.columns_set()


def test_the_environment_is_a_copy(monkeypatch) -> None:
    monkeypatch.setenv("ACCELOPT_TEST_VARIABLE", "1")
    copy = settings.environment()
    copy["ACCELOPT_TEST_VARIABLE"] = "2"
    assert settings.environment()["ACCELOPT_TEST_VARIABLE"] == "1"
