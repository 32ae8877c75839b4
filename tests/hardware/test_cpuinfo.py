import pytest

from accelopt.hardware.cpuinfo import (
    available_cpus,
    cpu_model_name,
    llc_level_and_bytes,
    parse_cache_size,
)


def _cache_index(root, name, level, kind, size):
    index = root / name
    index.mkdir(parents=True)
    (index / "level").write_text(f"{level}\n")
    (index / "type").write_text(f"{kind}\n")
    (index / "size").write_text(f"{size}\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("48K", 48 * 1024), ("32768K", 32 * 2**20), ("1M", 2**20), ("2G", 2 * 2**30), ("512", 512)],
)
def test_parse_cache_size(text, expected):
    assert parse_cache_size(text) == expected


def test_llc_is_the_highest_unified_level(tmp_path):
    _cache_index(tmp_path, "index0", 1, "Data", "48K")
    _cache_index(tmp_path, "index1", 1, "Instruction", "32K")
    _cache_index(tmp_path, "index2", 2, "Unified", "1024K")
    _cache_index(tmp_path, "index3", 3, "Unified", "32768K")
    assert llc_level_and_bytes(tmp_path) == (3, 32 * 2**20)


def test_llc_unknown_without_unified_cache(tmp_path):
    _cache_index(tmp_path, "index0", 1, "Data", "48K")
    (tmp_path / "index9").mkdir()  # unreadable entries are skipped
    assert llc_level_and_bytes(tmp_path) is None
    assert llc_level_and_bytes(tmp_path / "missing") is None


def test_cpu_model_name_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9B45\nflags\t\t: fpu\n")
    assert cpu_model_name(cpuinfo) == "AMD EPYC 9B45"


def test_cpu_model_name_falls_back(tmp_path):
    assert cpu_model_name(tmp_path / "missing")


def test_available_cpus():
    assert available_cpus() >= 1
