import platform
import stat
import subprocess
from pathlib import Path

import pytest

from accelopt.errors import CompilerNotFoundError
from accelopt.hardware import HardwareSpec, measure_cpu
from accelopt.hardware.cpuinfo import available_cpus
from accelopt.hardware.measure import (
    FMA,
    MICROBENCH_DIR,
    VECTOR,
    Compiler,
    Microbench,
    base_flags,
    build,
    find_compiler,
    triad_elements,
)

X86 = platform.machine().lower() in ("x86_64", "amd64")


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> HardwareSpec:
    """One real measurement (about a second) shared by the tests below."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACCELOPT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return measure_cpu()


def test_measured_figures_are_positive(measured):
    assert measured.backend == "cpu"
    assert measured.name.startswith("cpu:")
    assert measured.cores == available_cpus()
    assert measured.matmul_rate > 0
    assert measured.vector_rate > 0
    assert measured.bandwidth > 0
    assert measured.llc_bytes is None or measured.llc_bytes > 0


def test_measured_provenance(measured):
    for figure in ("matmul_rate", "vector_rate", "bandwidth"):
        text = measured.provenance[figure]
        assert text.startswith("measured: ")
        assert f"{measured.cores} threads" in text
    assert "FMA" in measured.provenance["matmul_rate"]
    assert "triad" in measured.provenance["bandwidth"]
    assert measured.provenance["cores"]


def test_microbench_is_built_once(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path))
    compiler = find_compiler()
    exe = build(FMA, compiler)
    mtime = exe.stat().st_mtime_ns
    assert build(FMA, compiler) == exe
    assert exe.stat().st_mtime_ns == mtime
    assert build(VECTOR, compiler) != exe  # other flags, other executable
    assert sorted(p.name for p in exe.parent.iterdir() if p.name.endswith(".tmp")) == []


def _assembly(compiler: Compiler, bench: Microbench, tmp_path: Path) -> str:
    out = tmp_path / f"{bench.name}.s"
    command = [*compiler.command, *base_flags(compiler), *bench.flags, "-S"]
    subprocess.run([*command, str(MICROBENCH_DIR / bench.source), "-o", str(out)], check=True)
    return out.read_text()


def _has_avx512() -> bool:
    try:
        return " avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not X86, reason="checks x86 mnemonics")
def test_fma_build_fuses_and_vector_build_does_not(tmp_path):
    compiler = find_compiler()
    lines = [line.split() for line in _assembly(compiler, FMA, tmp_path).splitlines()]
    packed_fma = [op for op in lines if op and op[0].startswith("vfmadd") and op[0].endswith("ps")]
    vector = _assembly(compiler, VECTOR, tmp_path)
    assert len(packed_fma) >= 8  # one FMA per chain in the unrolled loop: not folded away
    assert "vfmadd" not in vector
    assert "vmulps" in vector
    assert "vaddps" in vector
    if _has_avx512():
        assert len(packed_fma) >= 16
        assert all("zmm" in " ".join(op) for op in packed_fma)


def test_triad_arrays_exceed_the_llc():
    assert triad_elements(None) * 4 == 64 * 2**20
    assert triad_elements(32 * 2**20) * 4 == 4 * 32 * 2**20
    assert triad_elements(2**40) * 4 == 2**30


def test_missing_compiler(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(CompilerNotFoundError, match="install gcc or set CC"):
        measure_cpu()


def test_compiler_that_cannot_build(monkeypatch, tmp_path):
    fake = tmp_path / "fakecc"
    fake.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo "fakecc 1.0"; exit 0; fi\n'
        'echo "fakecc: cannot compile" >&2\nexit 1\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(fake))
    with pytest.raises(CompilerNotFoundError, match=r"failed.*cannot compile"):
        measure_cpu()
