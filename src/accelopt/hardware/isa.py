"""What the C compiler targets under the kernels' flags: the vector ISA, read from its predefined
macros (``cc <flags> -dM -E``), so that the facts agree with what a kernel can actually use
(``-march=native`` on an AVX-512 machine, ``ACCELOPT_CPU_TARGET=x86-64-v3`` for AVX2 only, a cross
compiler for aarch64). Nothing here runs code on the CPU.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from accelopt.hardware.toolchain import Compiler, target_flags

# x86-64 features by the macro that announces them, in the order they are shown.
X86_FEATURES = (
    ("__SSE4_2__", "sse4_2"),
    ("__AVX__", "avx"),
    ("__AVX2__", "avx2"),
    ("__FMA__", "fma"),
    ("__F16C__", "f16c"),
    ("__AVX512F__", "avx512f"),
    ("__AVX512BW__", "avx512bw"),
    ("__AVX512DQ__", "avx512dq"),
    ("__AVX512VL__", "avx512vl"),
    ("__AVX512VNNI__", "avx512vnni"),
    ("__AVX512BF16__", "avx512bf16"),
    ("__AVX512FP16__", "avx512fp16"),
    ("__AMX_TILE__", "amx_tile"),
    ("__AMX_BF16__", "amx_bf16"),
    ("__AMX_INT8__", "amx_int8"),
)
AARCH64_FEATURES = (
    ("__ARM_NEON", "neon"),
    ("__ARM_FEATURE_FMA", "fma"),
    ("__ARM_FEATURE_FP16_VECTOR_ARITHMETIC", "fp16"),
    ("__ARM_FEATURE_BF16", "bf16"),
    ("__ARM_FEATURE_DOTPROD", "dotprod"),
    ("__ARM_FEATURE_MATMUL_INT8", "i8mm"),
    ("__ARM_FEATURE_SVE", "sve"),
    ("__ARM_FEATURE_SVE2", "sve2"),
)
SVE_DEFAULT_VL = Path("/proc/sys/abi/sve_default_vector_length")  # bytes, on an aarch64 Linux
_DEFINE = re.compile(r"^#define[ \t]+(\w+)(?:[ \t]+(.*))?$", re.MULTILINE)


@dataclass(frozen=True)
class Isa:
    """The instruction set a kernel is compiled for."""

    arch: str  # "x86_64", "aarch64", ...
    features: tuple[str, ...]  # lower-case names: "avx2", "fma", "avx512f", "neon", "sve"
    vector_bits: int  # the widest float vector a kernel can use; 0 when unknown (SVE, no VL)
    flags: tuple[str, ...]  # the target flags they were read under, e.g. ("-march=native",)

    @property
    def vector_floats(self) -> int:
        return self.vector_bits // 32


def parse_macros(text: str) -> dict[str, str]:
    """``#define NAME VALUE`` lines (``cc -dM -E`` output) as a dict."""
    return {m.group(1): (m.group(2) or "").strip() for m in _DEFINE.finditer(text)}


def _sve_bits(macros: dict[str, str], cross: bool) -> int:
    fixed = macros.get("__ARM_FEATURE_SVE_BITS", "0")
    if fixed.isdigit() and int(fixed) > 0:
        return int(fixed)
    if cross:
        return 0
    try:  # the vector length this machine gives a process by default
        return int(SVE_DEFAULT_VL.read_text().strip()) * 8
    except (OSError, ValueError):
        return 0


def isa_from_macros(
    macros: dict[str, str], arch: str, flags: tuple[str, ...] = (), cross: bool = False
) -> Isa:
    """The ISA the predefined ``macros`` of a compile for ``arch`` announce (a pure function)."""
    if arch in ("x86_64", "amd64", "i686", "i386"):
        features = tuple(name for macro, name in X86_FEATURES if macro in macros)
        bits = 512 if "avx512f" in features else 256 if "avx" in features else 128
        return Isa("x86_64", features, bits, flags)
    if arch in ("aarch64", "arm64"):
        features = tuple(name for macro, name in AARCH64_FEATURES if macro in macros)
        bits = 128 if "neon" in features else 0
        if "sve" in features:
            bits = max(bits, _sve_bits(macros, cross))
        return Isa("aarch64", features, bits, flags)
    return Isa(arch, (), 0, flags)


@cache
def _macros(command: tuple[str, ...], flags: tuple[str, ...]) -> dict[str, str]:
    proc = subprocess.run(
        [*command, *flags, "-dM", "-E", "-x", "c", "-"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line] or lines or ["no output"]
        raise ValueError(f"{' '.join([*command, *flags])} failed: {errors[0]}")
    return parse_macros(proc.stdout)


def isa_from_compiler(compiler: Compiler, flags: tuple[str, ...]) -> Isa:
    """What ``compiler`` targets under ``flags``; raises ValueError (with the compiler's message)
    when it fails."""
    macros = _macros(compiler.command, flags)
    return isa_from_macros(macros, compiler.arch, flags, compiler.cross)


def detect_isa(compiler: Compiler) -> Isa:
    """What ``compiler`` targets under the kernels' target flags; raises ValueError (with the
    compiler's message) when it rejects them, e.g. an unknown ``ACCELOPT_CPU_TARGET``."""
    return isa_from_compiler(compiler, target_flags(compiler))


def describe_isa(isa: Isa) -> str:
    """The ISA in a kernel engineer's words: "AVX2 + FMA, 256-bit (8 floats); no AVX-512"."""
    have = set(isa.features)
    width = f"{isa.vector_bits}-bit ({isa.vector_floats} floats)" if isa.vector_bits else ""
    if isa.arch == "x86_64":
        if "avx512f" in have:
            subsets = [f.removeprefix("avx512").upper() for f in isa.features if "avx512" in f]
            head = "AVX-512 " + "/".join(s for s in subsets)
            extra = [n.upper() for n in ("amx_tile",) if n in have]
            return ", ".join([f"{head} + FMA", width, *extra])
        if "avx2" in have:
            fma = " + FMA" if "fma" in have else " (no FMA)"
            return f"AVX2{fma}, {width}; no AVX-512"
        if "avx" in have:
            return f"AVX, {width}; no AVX2, no FMA"
        return f"SSE ({'SSE4.2' if 'sse4_2' in have else 'SSE2'}), {width}; no AVX"
    if isa.arch == "aarch64":
        parts = ["NEON (ASIMD), 128-bit (4 floats)"] if "neon" in have else []
        if "sve2" in have or "sve" in have:
            name = "SVE2" if "sve2" in have else "SVE"
            vl = f"{isa.vector_bits}-bit vectors" if isa.vector_bits > 128 else "length agnostic"
            parts.append(f"{name} ({vl})")
        else:
            parts.append("no SVE")
        return "; ".join(parts)
    return f"{isa.arch}: vector ISA not known to accelopt"
