"""The ``cpu`` backend: static checks, compilation, and calling the shared object via ctypes."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelopt import settings
from accelopt.backends.base import BuildResult, KernelError
from accelopt.backends.buffers import BUFFER_ALIGNMENT
from accelopt.backends.cpu import checks, symbols
from accelopt.backends.cpu.checks import check_source
from accelopt.backends.cpu.compiler import (
    LIBS,
    LINK_FLAGS,
    OPT_FLAGS,
    OTHER_FLAGS,
    compile_kernel,
    kernel_flags,
    prototype,
)
from accelopt.backends.cpu.kernel_process import ExecutorStartError
from accelopt.backends.cpu.openmp import refusal as openmp_refusal
from accelopt.backends.cpu.remarks import vectorization_remarks
from accelopt.backends.cpu.remote import ExecutorDevice, RemoteKernel, probe_isolation
from accelopt.backends.cpu.symbols import disallowed_symbols
from accelopt.backends.facts import BackendFacts, describe_ceilings
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.errors import CompilerNotFoundError, UserError
from accelopt.hardware import devicelock
from accelopt.hardware.toolchain import Compiler, compiler_for, target_flags
from accelopt.problems.records import Problem, Sizes

if TYPE_CHECKING:  # annotations only: keeps pydantic out of worker processes
    from accelopt.hardware.spec import HardwareSpec


@cache
def sandbox_refused(cc: Compiler) -> str:
    """Why a kernel process here would get no system call filter ('' when it would): probed once
    per process (``executor.c`` applies the layers and answers)."""
    try:
        facts = probe_isolation(cc, settings.environment())
    except (ExecutorStartError, KernelError) as exc:
        return str(exc)
    if facts.get("memory_access") != "1":
        return f"the worker cannot reach a kernel process's memory: {facts.get('memory_access')}"
    if facts.get("seccomp") == "1" and facts.get("seccomp_load") == "1":
        return ""
    return "seccomp filters cannot be installed"


class CpuBackend:
    """C kernels, run in a separate sandboxed process (``kernel_process.py``, ``remote.py``)."""

    name = "cpu"
    compiles_on_first_call = False

    def __init__(self) -> None:
        self._threads = 1

    def preflight(self, timing: bool = True) -> None:
        """A compiler, and (where kernels can run here) a system that takes the sandbox's system
        call filter, unless ``ACCELOPT_UNSANDBOXED=1``: else one UserError saying so."""
        cc = compiler_for(settings.c_compiler())
        if cc.cross:
            return  # kernels built for another machine do not run here
        openmp = openmp_refusal(settings.environment())
        if openmp:
            raise UserError(openmp)
        refused = sandbox_refused(cc)
        if refused.startswith("the worker cannot reach"):
            raise UserError(
                f"{refused}; C kernels run in a process of their own whose memory the worker "
                "reads and writes: allow process_vm_readv to a child process (Yama's "
                "kernel.yama.ptrace_scope 0 or 1) or run as root"
            )
        if refused and settings.sandbox_required():
            raise UserError(
                f"this system refuses the kernel sandbox's system call filter ({refused}), so C "
                "kernels cannot be contained here; run on a Linux system that allows seccomp, or "
                "set ACCELOPT_UNSANDBOXED=1 to run them without it (unsafe with an untrusted model)"
            )

    def device(self) -> ExecutorDevice:
        """A new kernel process, with the worker's environment's OpenMP settings."""
        return ExecutorDevice(compiler_for(settings.c_compiler()), settings.environment())

    def lock_name(self) -> str:
        return "cpu"

    def runs_on_gpu(self) -> bool:
        return False

    def export_recipe(self) -> dict[str, Any]:
        compiler = compiler_for(settings.c_compiler())
        return {
            "compiler": Path(compiler.command[0]).name,
            "flags": [*OPT_FLAGS, *OTHER_FLAGS, *LINK_FLAGS],
            "target": list(target_flags(compiler)),  # -march=native, or ACCELOPT_CPU_TARGET's
            "arch": compiler.arch,
            "libs": list(LIBS),
        }

    def check(self, source: str) -> str | None:
        return check_source(source)

    def build(
        self, kernel: Kernel, problem: Problem, sizes: Sizes, timeout_s: float
    ) -> BuildResult:
        reason = self.check(kernel.source)
        if reason:
            return BuildResult(Status.REJECTED, reason)
        compiler = compiler_for(settings.c_compiler())
        built = compile_kernel(
            kernel.source,
            {p: int(sizes[p]) for p in problem.params},
            prototype(len(problem.inputs), len(problem.outputs)),
            work_dir=Path.cwd(),
            cache_dir=settings.cache_dir() / "kernels",
            timeout_s=timeout_s,
            cc=compiler,
        )
        banned = disallowed_symbols(built.artifact, compiler) if built.artifact else []
        if banned:
            return BuildResult(
                Status.REJECTED,
                f"the kernel calls {', '.join(banned[:5])}, which a kernel may not use "
                "(allowed: libm, OpenMP, memory and string functions, printf/puts/putchar)",
                seconds=built.seconds,
            )
        return built

    def load(
        self,
        artifact: Path,
        problem: Problem,
        device: object = None,
        memory_cap_bytes: int = 2 << 30,
    ) -> RemoteKernel:
        """Load the kernel into ``device``'s process (made by ``device()``, its buffers made)."""
        if not isinstance(device, ExecutorDevice):
            raise TypeError("a cpu kernel loads into the ExecutorDevice of CpuBackend.device()")
        n_args = len(problem.inputs) + len(problem.outputs)
        return device.load(artifact, n_args, self._threads, memory_cap_bytes)

    def set_threads(self, threads: int) -> None:
        self._threads = threads

    def facts(self, hardware: HardwareSpec) -> BackendFacts:
        """The C kernel contract (docs/architecture.md, Contracts) with the lists the checks and
        the compiler use."""
        try:
            cc = compiler_for(settings.c_compiler())
            command, version = " ".join(cc.command), f", compiled by {cc.version}"
        except CompilerNotFoundError:  # this machine's flags, as if CC were there
            cc = Compiler(command=(settings.c_compiler(),), version="")
            command, version = settings.c_compiler(), ""
        flags, arch = kernel_flags(cc), cc.arch
        contract = "\n".join(
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
                "Destination-passing: the kernel writes its results into the output buffers and "
                "must write every element of every output (outputs are NaN before each call).",
                "It must not modify its inputs (checked after each call) and must keep no state "
                "across calls (it is called many times, on several buffer sets).",
                "OpenMP is available; the harness sets the thread count (by default "
                f"{hardware.cores}, the device's cores). "
                "Scratch memory from malloc/aligned_alloc must be freed before returning.",
                self._intrinsics_rule(arch),
            ]
        )
        libc = ", ".join(sorted(name for name in symbols.ALLOWED if not name.startswith("_")))
        prefixes = ", ".join(f"{prefix}*" for prefix in symbols.ALLOWED_PREFIXES)
        forbidden = [
            "#include of any header not in the allowed list; #include_next, #import, #line and "
            "# <number> directives; raw string literals",
            f"inline assembly (asm, __asm__): {checks.intrinsics_advice(arch)}",
            *self._banned_calls(),
            "token pasting (##): it can hide names from the checks",
            "#pragma redefine_extname and #pragma weak: they rename symbols",
            "[[...]] attributes (use __attribute__ for what is permitted)",
            "__attribute__((" + "/".join(sorted(checks.FORBIDDEN_ATTRIBUTES)) + ")), however "
            "spelled (checked after preprocessing): a kernel runs only when called, from where "
            "the compiler puts it",
            "GNU nested functions (they need an executable stack)",
            "system calls: the kernel runs in a sandboxed process where opening files, the "
            "network, processes and signals kill it (REJECTED)",
            "importing any function other than libm, OpenMP and libmvec (symbols "
            f"{prefixes}) and: {libc} (checked on the built object, whatever the spelling)",
        ]
        return BackendFacts(
            backend=self.name,
            language="c",
            toolchain=f"C11 + OpenMP{version}",
            contract=contract,
            compile_command=" ".join(
                [
                    command,
                    *flags,
                    "-include <prototype>",
                    "-D<size>=<value> ...",
                    "-o kernel.so",
                    "kernel.c",
                    *LIBS,
                ]
            ),
            allowed_headers=checks.allowed_headers(arch),
            forbidden=tuple(forbidden),
            ceilings=describe_ceilings(hardware, matmul="matmul (FMA)", cores="cores/threads"),
        )

    @staticmethod
    def _intrinsics_rule(arch: str) -> str:
        """Which intrinsics the target has, and how a source carries another architecture's."""
        headers = set(checks.intrinsics_headers(arch))
        others = ", ".join(
            f"<{h}>" for h in sorted(checks.ACCEPTED_HEADERS - checks.COMMON_HEADERS - headers)
        )
        sve = " (SVE only where the vector ISA below has it: guard with #ifdef __ARM_FEATURE_SVE)"
        return (
            f"Target architecture: {arch}; {checks.intrinsics_advice(arch)}"
            f"{sve if 'arm_sve.h' in headers else ''}. Another architecture's intrinsics "
            f"({others}) belong only in a branch for it (#if defined(__x86_64__) / #elif "
            "defined(__aarch64__) / #else portable C), which is not compiled here."
        )

    @staticmethod
    def _banned_calls(examples: int = 6) -> list[str]:
        """One rule per category of functions the source checks refuse, with a few names."""
        by_category: dict[str, list[str]] = {}
        for name, category in checks.BANNED.items():
            by_category.setdefault(category, []).append(name)
        rules = []
        for category, names in sorted(by_category.items()):
            shown = sorted(names, key=lambda n: (len(n), n))[:examples]
            extra = ", the exec* family" if category == "process control" else ""
            rules.append(f"calls to {category} functions ({', '.join(shown)}, ...{extra})")
        return rules

    def remarks(self, source: str, problem: Problem, sizes: Sizes) -> list[str]:
        """GCC's vectorization report on the kernel; [] if the checks reject it or it does not
        build (compiled in this process with a timeout; nothing is run). The compiler holds the
        device lock shared, as a worker's compile does: never beside a timing."""
        if check_source(source) is not None:
            return []
        try:
            compiler = compiler_for(settings.c_compiler())
        except CompilerNotFoundError:
            return []
        with devicelock.shared(devicelock.lock_path(self.name)):
            return vectorization_remarks(
                source,
                {p: int(sizes[p]) for p in problem.params},
                prototype(len(problem.inputs), len(problem.outputs)),
                compiler,
            )
