"""Whether a CPU's measured FLOP rates are consistent with each other.

flops.c runs the same chains twice (``hardware.measure``): one fused multiply-add per update (the
matmul ceiling) or a multiply then an add (the vector ceiling), 2 FLOP per lane either way. On the
CPUs whose ISA this project detects, a multiply, an add and an FMA of one vector width issue on
the same floating-point pipes, so the vector rate is half the FMA rate (Intel: multiply and add
share the FMA ports; Arm NEON/SVE alike) or equal to it (AMD Zen: separate add pipes; any target
without FMA, where both builds are a multiply then an add). A vector rate far below that, under
VECTOR_FLOOR of the FMA rate, says the vector runs were disturbed (other work on the machine);
one far above it, over VECTOR_CAP, says the FMA runs were. Either makes the spec provisional,
with the doubtful ceiling unsure, so it is measured again once the machine is quiet.

Detected, never assumed: the check applies only to a spec whose architecture (x86_64, aarch64)
and ISA features were read from the compiler (``hardware.isa``); any other spec is left alone.
The FMA rate compared is the micro-benchmark's own (a ceiling raised to a library's sgemm, which
may use wider vectors than kernels are built for, is divided by its ``library_scale``).
"""

from __future__ import annotations

from accelopt.hardware.spec import Confidence, HardwareSpec

# Half the FMA rate is the lowest a quiet machine gives; a quarter leaves a factor of 2 of margin.
VECTOR_FLOOR = 0.25
# The vector rate equals the FMA rate at most; twice it leaves the same margin the other way.
VECTOR_CAP = 2.0
CHECKED_ARCHES = ("x86_64", "aarch64")


def fma_rate(spec: HardwareSpec) -> float:
    """The FMA micro-benchmark's own figure (before any raise to a library's)."""
    return spec.matmul_rate / spec.library_scale.get("matmul_rate", 1.0)


def _as_fraction(ratio: float) -> str:
    """``1/7`` for 0.14, ``3.2x`` for 3.2."""
    if ratio >= 1:
        return f"{ratio:.1f}x"
    return f"1/{round(1 / ratio)}"


def rate_doubt(spec: HardwareSpec) -> tuple[str, str] | None:
    """The ceiling whose figure is inconsistent with the other FLOP rate, and a few words on why;
    None when they agree, or when the spec's ISA was not detected (the check does not apply)."""
    if not spec.on_host or spec.arch not in CHECKED_ARCHES or not spec.isa:
        return None
    fma = fma_rate(spec)
    ratio = spec.vector_rate / fma if fma > 0 else 1.0
    where = f"on {spec.arch} a quiet machine gives 1/2 to 1"
    if ratio < VECTOR_FLOOR:
        return "vector_rate", f"vector rate {_as_fraction(ratio)} of the FMA rate ({where})"
    if ratio > VECTOR_CAP:
        return "matmul_rate", f"vector rate {_as_fraction(ratio)} the FMA rate ({where})"
    return None


def rates_checked(spec: HardwareSpec) -> HardwareSpec:
    """``spec``, made provisional with the doubtful ceiling unsure when its FLOP rates are
    inconsistent (``rate_doubt``); unchanged otherwise."""
    doubt = rate_doubt(spec)
    if doubt is None:
        return spec
    ceiling, why = doubt
    load = spec.provenance.get("load", "")
    if why not in load:
        load = f"provisional: {why}" + (f"; {load}" if load else "")
    return spec.model_copy(
        update={
            "provisional": True,
            "confidence": {**spec.confidence, ceiling: Confidence.UNSURE},
            "doubts": (*[d for d in spec.doubts if d != why], why),
            "provenance": {**spec.provenance, "load": load},
        }
    )
