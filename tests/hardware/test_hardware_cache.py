import json

import pytest

from accelopt.hardware import HardwareSpec, load_cpu_spec, measure_and_cache, save_cpu_spec
from accelopt.hardware import cache as hw_cache

SPEC = HardwareSpec(
    name="cpu:test",
    backend="cpu",
    matmul_rate=5e11,
    vector_rate=2.5e11,
    bandwidth=4.5e10,
    cores=2,
    llc_bytes=32 * 2**20,
    isa=("avx2", "fma"),
    provenance={"matmul_rate": "measured: test"},
)
OTHER = SPEC.model_copy(update={"name": "cpu:remeasured"})


@pytest.fixture(autouse=True)
def cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def fake_measure(monkeypatch):
    calls = []

    def measure(threads=None):
        calls.append(threads)
        return OTHER

    monkeypatch.setattr(hw_cache, "measure_cpu", measure)
    return calls


def test_round_trip(cache_dir):
    path = save_cpu_spec(SPEC)
    assert path == cache_dir / "hardware" / f"{hw_cache.machine_key()}.json"
    assert json.loads(path.read_text())["name"] == "cpu:test"
    assert load_cpu_spec(measure_if_missing=False) == SPEC


def test_cached_spec_is_not_remeasured(fake_measure):
    save_cpu_spec(SPEC)
    assert load_cpu_spec() == SPEC
    assert fake_measure == []


def test_a_spec_cached_before_the_isa_was_detected_is_remeasured(fake_measure):
    save_cpu_spec(SPEC.model_copy(update={"isa": ()}))
    assert load_cpu_spec() == OTHER
    assert fake_measure == [None]


def test_the_cpu_target_has_its_own_cached_spec(monkeypatch):
    native = hw_cache.cpu_spec_path()
    monkeypatch.setenv("ACCELOPT_CPU_TARGET", "x86-64-v3")
    assert hw_cache.cpu_spec_path() != native


def test_missing_without_measuring_is_none():
    assert load_cpu_spec(measure_if_missing=False) is None


def test_missing_is_measured_and_cached(fake_measure):
    assert load_cpu_spec() == OTHER
    assert fake_measure == [None]
    assert load_cpu_spec(measure_if_missing=False) == OTHER


@pytest.mark.parametrize("content", ["{not json", '{"name": 1}', "", "\x00\xff garbage"])
def test_corrupt_file_is_ignored_and_remeasured(fake_measure, content):
    path = hw_cache.cpu_spec_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, errors="surrogateescape")
    assert load_cpu_spec(measure_if_missing=False) is None
    assert load_cpu_spec() == OTHER
    assert HardwareSpec.model_validate_json(path.read_text()) == OTHER


def test_measure_and_cache_passes_threads(fake_measure):
    assert measure_and_cache(threads=1) == OTHER
    assert fake_measure == [1]
    assert load_cpu_spec(measure_if_missing=False) == OTHER


def test_machine_key_is_short_and_follows_the_host(monkeypatch):
    key = hw_cache.machine_key()
    assert len(key) == 16
    assert key == hw_cache.machine_key()
    monkeypatch.setattr(hw_cache.socket, "gethostname", lambda: "another-host")
    assert hw_cache.machine_key() != key
