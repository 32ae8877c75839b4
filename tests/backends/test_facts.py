"""Backend facts: the contract and ceilings an agent is told, from the lists the checks enforce."""

from __future__ import annotations

import pytest
from specs import make_spec

from accelopt import settings
from accelopt.backends.base import get_backend
from accelopt.backends.cpu import backend as cpu_backend
from accelopt.backends.cpu import checks, compiler, symbols
from accelopt.backends.facts import BackendFacts, describe_ceilings
from accelopt.hardware.toolchain import Compiler, compiler_for

# Every figure, cache and provenance the assertions below quote, given here.
MEASURED = make_spec(
    name="cpu:Test CPU",
    matmul_rate=531.8e9,
    vector_rate=521.8e9,
    bandwidth=49.0e9,
    cores=2,
    llc_bytes=32 << 20,
    arch="x86_64",
    isa=("sse4_2", "avx", "avx2", "fma", "f16c"),
    vector_bits=256,
    l1d_bytes=32 << 10,
    l2_bytes=512 << 10,
    provenance={
        "isa": "cc predefined macros under -march=native",
        "l1d_bytes": "sysfs: level-1 data cache, one per core",
        "l2_bytes": "sysfs: level-2 unified cache, one per core",
        "matmul_rate": "measured: FMA micro-benchmark flops.c, 2 threads, 2026-01-01",
        "vector_rate": "measured: multiply+add micro-benchmark flops.c, 2 threads, 2026-01-01",
        "bandwidth": "measured: STREAM triad triad.c, 2 threads, 2026-01-01",
        "cores": "OpenMP threads used (2 CPUs in the affinity mask)",
        "llc_bytes": "sysfs: level-3 unified cache, shared by 2 CPUs",
    },
)


@pytest.fixture(scope="module")
def cpu_facts() -> BackendFacts:
    return get_backend("cpu").facts(MEASURED)


def test_cpu_facts_state_the_signature_rule(cpu_facts):
    text = cpu_facts.render()
    assert "void kernel(const float *in0, ..., float *out0, ...)" in text
    assert "inputs (const float *) then its outputs (float *), in the problem's order" in text
    for rule in ("float32", "row-major", "contiguous", "64-byte", "#define", "Destination-passing"):
        assert rule in text
    assert "every element of every output" in text
    assert "must not modify its inputs" in text and "no state across calls" in text


def test_cpu_facts_list_every_allowed_header_and_the_compile_command(cpu_facts, headers_for):
    assert cpu_facts.backend == "cpu" and cpu_facts.toolchain.startswith("C11 + OpenMP")
    assert cpu_facts.language == "c"
    cc = compiler_for(settings.c_compiler())
    assert set(cpu_facts.allowed_headers) == headers_for(cc.arch)
    text = cpu_facts.render()
    for header in headers_for(cc.arch):
        assert f"<{header}>" in text
    assert " ".join(compiler.kernel_flags(cc)) in cpu_facts.compile_command
    assert all(lib in cpu_facts.compile_command for lib in compiler.LIBS)
    assert cpu_facts.compile_command in text


def test_cpu_facts_forbid_what_the_checks_reject(cpu_facts):
    forbidden = "\n".join(cpu_facts.forbidden)
    for needle in ("asm", "##", "[[", "constructor", "redefine_extname", "#pragma weak"):
        assert needle in forbidden
    for category in set(checks.BANNED.values()):
        assert category in forbidden
    # what the symbol check allows, from its own list
    for name in ("printf", "puts", "putchar", "memcpy", "malloc", "libm", "OpenMP"):
        assert name in forbidden
    for name in symbols.ALLOWED - {n for n in symbols.ALLOWED if n.startswith("_")}:
        assert name in forbidden
    assert len(cpu_facts.forbidden) == len(set(cpu_facts.forbidden))


def test_cpu_facts_give_each_ceiling_with_its_provenance(cpu_facts):
    text = cpu_facts.render()
    assert "matmul (FMA) 531.8 GFLOP/s — measured: FMA micro-benchmark flops.c" in text
    assert "vector 521.8 GFLOP/s — measured: multiply+add" in text
    assert "memory bandwidth 49.0 GB/s — measured: STREAM triad" in text
    assert "cores/threads 2 — OpenMP threads used" in text
    assert "roofline" in text
    assert "OpenMP" in cpu_facts.contract and "2, the device's cores" in cpu_facts.contract


def test_cpu_facts_name_the_vector_isa_and_the_caches(cpu_facts):
    text = cpu_facts.render()
    assert "vector ISA: AVX2 + FMA, 256-bit (8 floats); no AVX-512 — cc predefined macros" in text
    caches = "caches: L1d 32 KiB (one per core), L2 512 KiB (one per core), last-level 32 MiB "
    assert caches + "(shared by 2 CPUs)" in text
    assert "inputs are cold" in text and "512 MiB" in text


@pytest.mark.parametrize(
    ("arch", "isa", "bits", "words"),
    [
        (
            "x86_64",
            ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl"),
            512,
            "AVX-512 F/BW/DQ/VL + FMA, 512-bit (16 floats)",
        ),
        ("x86_64", ("sse4_2",), 128, "SSE (SSE4.2), 128-bit (4 floats); no AVX"),
        ("aarch64", ("neon", "fma"), 128, "NEON (ASIMD), 128-bit (4 floats); no SVE"),
        ("aarch64", ("neon", "fma", "sve", "sve2"), 256, "SVE2 (256-bit vectors)"),
        ("aarch64", ("neon", "fma", "sve"), 128, "SVE (length agnostic)"),
    ],
)
def test_the_isa_is_said_in_a_kernel_engineers_words(arch, isa, bits, words):
    spec = MEASURED.model_copy(update={"arch": arch, "isa": isa, "vector_bits": bits})
    assert words in describe_ceilings(spec)


@pytest.mark.parametrize(
    ("machine", "mine", "other", "advice"),
    [
        ("x86_64-linux-gnu", "immintrin.h", "arm_neon.h", "<immintrin.h>"),
        ("aarch64-linux-gnu", "arm_neon.h", "immintrin.h", "<arm_neon.h>/<arm_sve.h>"),
    ],
)
def test_cpu_facts_list_the_target_architectures_headers(
    monkeypatch, headers_for, machine, mine, other, advice
):
    """What the agents are told follows the compiler's target, not the machine accelopt runs on."""
    target = Compiler(command=("gcc",), version="gcc 12", machine=machine)
    monkeypatch.setattr(cpu_backend, "compiler_for", lambda _: target)
    facts = get_backend("cpu").facts(MEASURED)
    assert mine in facts.allowed_headers and other not in facts.allowed_headers
    assert set(facts.allowed_headers) == headers_for(target.arch)
    assert f"inline assembly (asm, __asm__): use the intrinsics of {advice}" in facts.forbidden
    assert f"Target architecture: {target.arch}; use the intrinsics of {advice}" in facts.contract
    assert f"<{other}>" in facts.contract  # how a guarded path for the other one is written
    assert ("__ARM_FEATURE_SVE" in facts.contract) == (target.arch == "aarch64")


def test_cpu_facts_without_a_compiler(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/accelopt-test-cc")
    facts = get_backend("cpu").facts(MEASURED)
    assert facts.compile_command.startswith("/nonexistent/accelopt-test-cc -O3")


def test_ceilings_without_provenance_or_cache():
    text = describe_ceilings(make_spec(matmul_rate=545e9, bandwidth=45e9, llc_bytes=None))
    assert "matmul 545.0 GFLOP/s — source not recorded" in text
    assert "memory bandwidth 45.0 GB/s" in text
    assert "last-level" not in text and "vector ISA" not in text


def test_numpy_facts_describe_the_reference_not_user_code():
    facts = get_backend("numpy").facts(MEASURED)
    assert facts.backend == "numpy"
    assert "NumPy" in facts.toolchain and facts.language == "python"
    assert "Not user code" in facts.contract and "reference(*inputs)" in facts.contract
    assert facts.allowed_headers == () and facts.forbidden == () and facts.compile_command == ""
    text = facts.render()
    assert "### Build" not in text and "### Allowed headers" not in text
    assert "matmul 531.8 GFLOP/s — measured" in text


def test_facts_are_frozen(cpu_facts):
    with pytest.raises(AttributeError):
        cpu_facts.backend = "other"  # type: ignore[misc]
