"""This CPU's spec: its measured ceilings (``hardware.measure``), how sure each is
(``hardware.figures``) and the facts that describe the machine rather than measure it: the ISA
kernels are compiled for and the sizes of its data caches, each with its source.
"""

from __future__ import annotations

from accelopt import settings
from accelopt.errors import UserError
from accelopt.hardware.consistency import rates_checked
from accelopt.hardware.cpuinfo import (
    CACHE_SYSFS,
    CacheLevel,
    available_cpus,
    cache_levels,
    cpu_model_name,
    data_cache,
    last_level,
)
from accelopt.hardware.figures import judgement
from accelopt.hardware.isa import Isa, describe_isa, detect_isa, isa_from_compiler
from accelopt.hardware.measure import CEILINGS, measure_figures
from accelopt.hardware.spec import HOST_BACKEND, HardwareSpec
from accelopt.hardware.toolchain import Compiler, find_compiler, no_compiler


def measure_cpu(threads: int | None = None) -> HardwareSpec:
    """Measure this CPU's matmul and vector FLOP/s and its memory bandwidth on ``threads``
    threads (default: every CPU in this process's affinity mask). Takes several seconds, each
    step a progress line on stderr. FLOP rates inconsistent with each other make the spec
    provisional (``hardware.consistency``)."""
    threads = threads or available_cpus()
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    compiler = find_compiler()
    isa = machine_isa(compiler)
    levels = cache_levels()
    llc = last_level(levels)
    measured = measure_figures(CEILINGS, threads, compiler)
    figures = measured.figures
    spec = HardwareSpec(
        name=f"cpu:{cpu_model_name()}",
        backend=HOST_BACKEND,
        matmul_rate=figures["matmul_rate"].value,
        vector_rate=figures["vector_rate"].value,
        bandwidth=figures["bandwidth"].value,
        cores=threads,
        llc_bytes=llc[1] if llc else None,
        **machine_facts(isa, levels),
        provisional=measured.provisional,
        doubts=measured.doubts,
        **judgement(figures),
        provenance={
            **{name: figure.provenance for name, figure in figures.items()},
            **_provenance(levels),
            "load": measured.describe(),
            **facts_provenance(isa, compiler, levels),
        },
    )
    return rates_checked(spec)


def machine_isa(compiler: Compiler) -> Isa:
    """The ISA kernels are compiled for; a target the compiler rejects is the user's to fix."""
    try:
        return detect_isa(compiler)
    except ValueError as exc:
        target = settings.cpu_target()
        if target is None or not _preprocesses(compiler):  # the compiler, not the target
            raise no_compiler(str(exc)) from exc
        raise UserError(
            f"the C compiler rejects ACCELOPT_CPU_TARGET={target!r} ({exc}): set it to a CPU "
            "the compiler knows (e.g. x86-64-v3, neoverse-n1) or unset it"
        ) from exc


def _preprocesses(compiler: Compiler) -> bool:
    """Whether the compiler works at all without a CPU target."""
    try:
        isa_from_compiler(compiler, ())
    except ValueError:
        return False
    return True


def _sharing(cache: CacheLevel) -> str:
    return "one per core" if cache.shared_by <= 1 else f"shared by {cache.shared_by} CPUs"


def machine_facts(isa: Isa, levels: list[CacheLevel]) -> dict[str, object]:
    """The HardwareSpec fields that describe the machine rather than measure it."""
    l1d, l2 = data_cache(levels, 1), data_cache(levels, 2)
    return {
        "arch": isa.arch,
        "isa": isa.features,
        "vector_bits": isa.vector_bits or None,
        "l1d_bytes": l1d.size_bytes if l1d else None,
        "l2_bytes": l2.size_bytes if l2 else None,
    }


def facts_provenance(isa: Isa, compiler: Compiler, levels: list[CacheLevel]) -> dict[str, str]:
    flags = " ".join(isa.flags) or "its default target"
    provenance = {
        "isa": f"{compiler.command[0]} predefined macros under {flags}: {describe_isa(isa)}",
    }
    for field, level in (("l1d_bytes", 1), ("l2_bytes", 2)):
        cache = data_cache(levels, level)
        if cache is not None:
            provenance[field] = (
                f"sysfs: {CACHE_SYSFS}, level-{level} {cache.kind.lower()} cache, {_sharing(cache)}"
            )
    return provenance


def _provenance(levels: list[CacheLevel]) -> dict[str, str]:
    provenance = {"cores": f"OpenMP threads used ({available_cpus()} CPUs in the affinity mask)"}
    llc = last_level(levels)
    if llc is not None:
        shared = data_cache(levels, llc[0])
        sharing = f", {_sharing(shared)}" if shared else ""
        provenance["llc_bytes"] = f"sysfs: {CACHE_SYSFS}, level-{llc[0]} unified cache{sharing}"
    return provenance
