"""The C kernel contract as the agents are told it (``CpuBackend.facts``; docs/architecture.md,
Contracts): written from the lists the checks, the compiler and the symbol check enforce, so that
a prompt never drifts from what the harness does."""

from __future__ import annotations

from accelopt.backends.buffers import BUFFER_ALIGNMENT
from accelopt.backends.cpu import symbols
from accelopt.backends.cpu.checks import BANNED
from accelopt.backends.cpu.compiler import LIBS, kernel_flags
from accelopt.backends.cpu.headers import (
    ACCEPTED_HEADERS,
    COMMON_HEADERS,
    intrinsics_advice,
    intrinsics_headers,
)
from accelopt.backends.cpu.token_scan import FORBIDDEN_ATTRIBUTES
from accelopt.hardware.toolchain import Compiler


def contract_text(arch: str, cores: int) -> str:
    """The contract for a kernel compiled for ``arch`` and run with ``cores`` threads by
    default: its signature, its buffers and sizes, destination-passing, OpenMP, intrinsics."""
    return "\n".join(
        [
            "One C11 translation unit (GNU dialect, -std=gnu11) that defines",
            "  void kernel(const float *in0, ..., float *out0, ...)",
            "with the problem's inputs (const float *) then its outputs (float *), in the "
            "problem's order. The prototype is force-included: another signature does not "
            "build.",
            "Every tensor is float32, row-major and contiguous; every buffer is "
            f"{BUFFER_ALIGNMENT}-byte aligned (aligned vector loads and stores are legal on "
            "every argument).",
            "Sizes are compile-time #defines named after the problem's size parameters "
            "(e.g. M, N, K): the kernel is compiled for one workload's sizes.",
            "Where the build knows them, ACCELOPT_L1D_BYTES and ACCELOPT_L2_BYTES are "
            "#defined to this machine's per-core L1 data and L2 cache sizes in bytes: derive "
            "cache blocking from them, with a default behind #ifndef (a cross build has none).",
            "Destination-passing: the kernel writes its results into the output buffers and "
            "must write every element of every output (outputs are NaN before each call).",
            "It must not modify its inputs (checked after each call) and must keep no state "
            "across calls (it is called many times, on several buffer sets).",
            "OpenMP is available; the harness sets the thread count (by default "
            f"{cores}, the device's cores). "
            "Scratch memory from malloc/aligned_alloc must be freed before returning.",
            _intrinsics_rule(arch),
        ]
    )


def _intrinsics_rule(arch: str) -> str:
    """Which intrinsics the target has, and how a source carries another architecture's."""
    headers = set(intrinsics_headers(arch))
    others = ", ".join(f"<{h}>" for h in sorted(ACCEPTED_HEADERS - COMMON_HEADERS - headers))
    sve = " (SVE only where the vector ISA below has it: guard with #ifdef __ARM_FEATURE_SVE)"
    return (
        f"Target architecture: {arch}; {intrinsics_advice(arch)}"
        f"{sve if 'arm_sve.h' in headers else ''}. Another architecture's intrinsics "
        f"({others}) belong only in a branch for it (#if defined(__x86_64__) / #elif "
        "defined(__aarch64__) / #else portable C), which is not compiled here."
    )


def forbidden_rules(arch: str) -> tuple[str, ...]:
    """What the checks refuse, one rule each: the source checks, the preprocessed checks, the
    sandbox and the symbol check of the built object."""
    libc = ", ".join(sorted(name for name in symbols.ALLOWED if not name.startswith("_")))
    prefixes = ", ".join(f"{prefix}*" for prefix in symbols.ALLOWED_PREFIXES)
    return (
        "#include of any header not in the allowed list; #include_next, #import, #line and "
        "# <number> directives; raw string literals",
        f"inline assembly (asm, __asm__): {intrinsics_advice(arch)}",
        *_banned_calls(),
        "token pasting (##): it can hide names from the checks",
        "#pragma redefine_extname and #pragma weak: they rename symbols",
        "[[...]] attributes (use __attribute__ for what is permitted)",
        "__attribute__((" + "/".join(sorted(FORBIDDEN_ATTRIBUTES)) + ")), however "
        "spelled (checked after preprocessing): a kernel runs only when called, from where "
        "the compiler puts it",
        "GNU nested functions (they need an executable stack)",
        "system calls: the kernel runs in a sandboxed process where opening files, the "
        "network, processes and signals kill it (REJECTED)",
        "importing any function other than libm, OpenMP and libmvec (symbols "
        f"{prefixes}) and: {libc} (checked on the built object, whatever the spelling)",
    )


def _banned_calls(examples: int = 6) -> list[str]:
    """One rule per category of functions the source checks refuse, with a few names."""
    by_category: dict[str, list[str]] = {}
    for name, category in BANNED.items():
        by_category.setdefault(category, []).append(name)
    rules = []
    for category, names in sorted(by_category.items()):
        shown = sorted(names, key=lambda n: (len(n), n))[:examples]
        extra = ", the exec* family" if category == "process control" else ""
        rules.append(f"calls to {category} functions ({', '.join(shown)}, ...{extra})")
    return rules


def compile_command(command: str, cc: Compiler) -> str:
    """How a kernel is built, as the agents are shown it (``command`` runs ``cc``)."""
    args = ["-include <prototype>", "-D<size>=<value> ...", "-o kernel.so", "kernel.c"]
    return " ".join([command, *kernel_flags(cc), *args, *LIBS])
