import platform
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from accelopt.errors import CompilerNotFoundError
from accelopt.hardware import HardwareSpec, measure_cpu
from accelopt.hardware import measure as measure_module
from accelopt.hardware.cpuinfo import available_cpus
from accelopt.hardware.isa import detect_isa
from accelopt.hardware.measure import (
    CEILINGS,
    FMA,
    MICROBENCH_DIR,
    PATTERNS,
    VECTOR,
    Compiler,
    Microbench,
    bandwidth_provenance,
    base_flags,
    build,
    find_compiler,
    run,
    run_triad,
    triad_elements,
)
from accelopt.hardware.spec import Confidence

X86 = platform.machine().lower() in ("x86_64", "amd64")
ARM_CC = "aarch64-linux-gnu-gcc"


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> HardwareSpec:
    """One real measurement shared by the tests below, made quick: no pause between its rounds,
    the smallest triad arrays (a VM that reports a huge LLC would otherwise stream 5 x 1 GiB) and
    a quarter of the FMA chains (the figures' size is not what these tests check)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACCELOPT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        mp.setattr(measure_module, "ROUND_PAUSE_S", 0.0)
        mp.setattr(measure_module, "TRIAD_MAX_ARRAY_BYTES", measure_module.TRIAD_MIN_ARRAY_BYTES)
        mp.setattr(measure_module, "FLOPS_ITERATIONS", measure_module.FLOPS_ITERATIONS // 4)
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


@pytest.mark.skipif(not X86, reason="checks x86 mnemonics")
def test_fma_build_fuses_and_vector_build_does_not(tmp_path):
    compiler = find_compiler()
    features = detect_isa(compiler).features  # what the target has, not what the CPU has
    if "fma" not in features:
        pytest.skip("the CPU target has no FMA (ACCELOPT_CPU_TARGET)")
    lines = [line.split() for line in _assembly(compiler, FMA, tmp_path).splitlines()]
    packed_fma = [op for op in lines if op and op[0].startswith("vfmadd") and op[0].endswith("ps")]
    vector = _assembly(compiler, VECTOR, tmp_path)
    assert len(packed_fma) >= 8  # one FMA per chain in the unrolled loop: not folded away
    assert "vfmadd" not in vector
    assert "vmulps" in vector
    assert "vaddps" in vector
    if "avx512f" in features:
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


def test_measured_spread_and_load(measured):
    assert set(measured.spread) == {"matmul_rate", "vector_rate", "bandwidth"}
    assert all(0 <= s < 1 for s in measured.spread.values())
    load = measured.provenance["load"]
    assert load.startswith("provisional") == measured.provisional
    assert measured.provisional or load.startswith("quiet during the measurement")
    text = measured.provenance["bandwidth"]
    assert all(name in text for name in PATTERNS)  # every pattern's figure is kept
    assert "3 rounds and a control over" in text
    assert "3 rounds over" in measured.provenance["matmul_rate"]


def test_measured_confidence_says_why_a_spec_is_provisional(measured):
    assert set(measured.disagreement) == set(measured.confidence) == set(CEILINGS)
    assert all(0 <= d < 1 for d in measured.disagreement.values())
    assert measured.provisional == (Confidence.UNSURE in measured.confidence.values())


def test_the_triad_json_has_every_pattern(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path))
    out = run_triad(find_compiler(), threads=1, n=1 << 15, repeats=3)
    assert list(out["patterns"]) == list(PATTERNS)
    for name, pattern in out["patterns"].items():
        assert pattern["best"] >= pattern["median"] >= pattern["worst"] > 0, name
        assert pattern["writes"] == (0 if name == "read" else 1)
    assert out["pattern"] in PATTERNS
    assert out["bandwidth"] == max(p["best"] for p in out["patterns"].values())
    assert out["bandwidth"] == out["patterns"][out["pattern"]]["best"]
    assert out["repeats"] == 3 and out["n"] == 1 << 15


def test_the_flops_json_has_best_median_and_worst(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path))
    out = run(build(FMA, find_compiler()), 1, 10_000, 3)
    assert out["rate"] >= out["median"] >= out["worst"] > 0
    assert out["repeats"] == 3


@pytest.mark.parametrize(
    "flags",
    [("-march=x86-64",), ("-march=x86-64-v3",), ("-march=x86-64-v4",)],
    ids=["sse", "avx2", "avx512"],
)
@pytest.mark.skipif(not X86, reason="x86 targets")
def test_triad_builds_on_every_x86_path(tmp_path, flags):
    command = [*find_compiler().command, "-O3", *flags, "-fopenmp", "-Wall", "-Werror", "-c"]
    source = MICROBENCH_DIR / "triad.c"
    subprocess.run([*command, str(source), "-o", str(tmp_path / "t.o")], check=True)


@pytest.mark.skipif(shutil.which(ARM_CC) is None, reason=f"{ARM_CC} is not installed")
@pytest.mark.parametrize("source", ["triad.c", "flops.c"])
def test_microbenchmarks_build_for_aarch64(tmp_path, source):
    command = [ARM_CC, "-O3", "-mcpu=neoverse-n1", "-fopenmp", "-Wall", "-Werror", "-c"]
    subprocess.run(
        [*command, str(MICROBENCH_DIR / source), "-o", str(tmp_path / "t.o")], check=True
    )


def test_bandwidth_provenance_names_the_winner_and_every_pattern():
    patterns = {
        name: {"best": (i + 1) * 1e9, "median": i * 1e9, "worst": i * 0.5e9}
        for i, name in enumerate(PATTERNS)
    }
    out = {"bandwidth": 10e9, "pattern": "sum4_nt", "patterns": patterns, "repeats": 6}
    text = bandwidth_provenance(out, 32 << 20)
    assert text.startswith("best of 10 read:write mixes in triad.c over arrays of 128 MiB")
    assert "sum4_nt (4:1 non-temporal stores), best of 6 (spread 10%)" in text
    assert "read 1.0, copy 2.0" in text and "sum4_nt 10.0" in text
