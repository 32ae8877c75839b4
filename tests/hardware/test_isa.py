"""The vector ISA is what the compiler targets under the kernels' flags, read from its macros."""

from __future__ import annotations

import platform

import pytest

from accelopt.errors import UserError
from accelopt.hardware.cpu_spec import machine_isa
from accelopt.hardware.isa import describe_isa, detect_isa, isa_from_macros, parse_macros
from accelopt.hardware.toolchain import Compiler, find_compiler, target_flags

X86 = platform.machine().lower() in ("x86_64", "amd64")
V3 = "#define __SSE4_2__ 1\n#define __AVX__ 1\n#define __AVX2__ 1\n#define __FMA__ 1\n"


def test_macros_are_parsed_with_and_without_values():
    assert parse_macros("#define __AVX2__ 1\n#define __x86_64 \n#define N (1 + 2)\n") == {
        "__AVX2__": "1", "__x86_64": "", "N": "(1 + 2)",
    }  # fmt: skip


def test_an_avx2_target_has_256_bit_vectors_and_no_avx512():
    isa = isa_from_macros(parse_macros(V3), "x86_64")
    assert isa.features == ("sse4_2", "avx", "avx2", "fma") and isa.vector_floats == 8
    assert describe_isa(isa) == "AVX2 + FMA, 256-bit (8 floats); no AVX-512"


def test_an_avx512_target_names_its_subsets():
    macros = parse_macros(
        V3 + "#define __AVX512F__ 1\n#define __AVX512BW__ 1\n#define __AMX_TILE__ 1\n"
    )
    isa = isa_from_macros(macros, "x86_64")
    assert isa.vector_bits == 512 and "amx_tile" in isa.features
    assert describe_isa(isa).startswith("AVX-512 F/BW + FMA, 512-bit (16 floats)")


def test_aarch64_sve_length_comes_from_the_compiler_when_fixed():
    macros = parse_macros(
        "#define __ARM_NEON 1\n#define __ARM_FEATURE_SVE 1\n#define __ARM_FEATURE_SVE_BITS 512\n"
    )
    isa = isa_from_macros(macros, "aarch64", cross=True)
    assert isa.features == ("neon", "sve") and isa.vector_bits == 512
    unknown = isa_from_macros(parse_macros("#define __ARM_NEON 1\n#define __ARM_FEATURE_SVE 1\n"),
                              "aarch64", cross=True)  # fmt: skip
    assert unknown.vector_bits == 128  # the SVE length is only known on the machine itself


def test_an_unknown_architecture_has_no_features():
    isa = isa_from_macros({}, "riscv64")
    assert isa.features == () and "not known" in describe_isa(isa)


@pytest.mark.skipif(not X86, reason="x86-64 levels need an x86-64 compiler")
def test_the_target_decides_what_is_detected(monkeypatch):
    cc = find_compiler()
    monkeypatch.setenv("ACCELOPT_CPU_TARGET", "x86-64-v3")
    isa = detect_isa(cc)
    assert target_flags(cc) == ("-march=x86-64-v3",) == isa.flags
    assert {"avx2", "fma"} <= set(isa.features) and "avx512f" not in isa.features
    monkeypatch.setenv("ACCELOPT_CPU_TARGET", "x86-64-v4")
    assert "avx512f" in detect_isa(cc).features


def test_a_target_the_compiler_rejects_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("ACCELOPT_CPU_TARGET", "no-such-cpu")
    with pytest.raises(UserError, match=r"rejects ACCELOPT_CPU_TARGET='no-such-cpu'.*unset it"):
        machine_isa(find_compiler())


def test_aarch64_uses_mcpu_and_a_cross_compiler_without_target_uses_its_default(monkeypatch):
    arm = Compiler(("aarch64-linux-gnu-gcc",), "gcc 12", "aarch64-linux-gnu")
    monkeypatch.delenv("ACCELOPT_CPU_TARGET", raising=False)
    assert target_flags(arm) == (() if arm.cross else ("-mcpu=native",))
    monkeypatch.setenv("ACCELOPT_CPU_TARGET", "neoverse-n1")
    assert target_flags(arm) == ("-mcpu=neoverse-n1",)
    monkeypatch.setenv("ACCELOPT_CPU_TARGET", "armv8.2-a+sve")
    assert target_flags(arm) == ("-march=armv8.2-a+sve",)
