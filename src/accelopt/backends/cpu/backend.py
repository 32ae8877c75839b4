"""The ``cpu`` backend: static checks, compilation, and calling the shared object via ctypes."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import accelopt.backends.registry as registry
from accelopt import settings
from accelopt.backends.base import BuildResult, CheckedBuild, KernelError
from accelopt.backends.cpu.cache_macros import cache_macros
from accelopt.backends.cpu.checks import check_source
from accelopt.backends.cpu.compiler import (
    LIBS,
    LINK_FLAGS,
    OPT_FLAGS,
    OTHER_FLAGS,
    BuildInputs,
    compile_kernel,
    prototype,
)
from accelopt.backends.cpu.contract import compile_command, contract_text, forbidden_rules
from accelopt.backends.cpu.headers import allowed_headers
from accelopt.backends.cpu.kernel_process import KernelHostStartError
from accelopt.backends.cpu.openmp import refusal as openmp_refusal
from accelopt.backends.cpu.remarks import vectorization_remarks
from accelopt.backends.cpu.remote import KernelHostDevice, probe_isolation
from accelopt.backends.cpu.symbols import disallowed_symbols
from accelopt.backends.facts import BackendFacts, describe_ceilings
from accelopt.backends.kernel import Kernel
from accelopt.backends.remote_kernel import RemoteKernel
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
    per process (``kernel_host.c`` applies the layers and answers)."""
    try:
        facts = probe_isolation(cc, settings.environment())
    except (KernelHostStartError, KernelError) as exc:
        return str(exc)
    if facts.get("memory_access") != "1":
        return f"the worker cannot reach a kernel process's memory: {facts.get('memory_access')}"
    if facts.get("seccomp") == "1" and facts.get("seccomp_load") == "1":
        return ""
    return "seccomp filters cannot be installed"


def build_inputs(source: str, problem: Problem, sizes: Sizes, cc: Compiler) -> BuildInputs:
    """``source`` built for ``sizes`` of ``problem``: the sizes and this machine's cache sizes
    (``cache_macros``) as -D macros, the contract's prototype for its inputs and outputs."""
    defines = {**cache_macros(cc), **{p: int(sizes[p]) for p in problem.params}}
    return BuildInputs(source, defines, prototype(len(problem.inputs), len(problem.outputs)), cc)


class CpuBackend(CheckedBuild):
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

    def device(self) -> KernelHostDevice:
        """A new kernel process, with the worker's environment's OpenMP settings."""
        return KernelHostDevice(compiler_for(settings.c_compiler()), settings.environment())

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

    def build_checked(
        self, kernel: Kernel, problem: Problem, sizes: Sizes, timeout_s: float
    ) -> BuildResult:
        compiler = compiler_for(settings.c_compiler())
        built = compile_kernel(
            build_inputs(kernel.source, problem, sizes, compiler),
            work_dir=Path.cwd(),
            cache_dir=settings.cache_dir() / "kernels",
            timeout_s=timeout_s,
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
        if not isinstance(device, KernelHostDevice):
            raise TypeError("a cpu kernel loads into the KernelHostDevice of CpuBackend.device()")
        n_args = len(problem.inputs) + len(problem.outputs)
        return device.load(artifact, n_args, self._threads, memory_cap_bytes)

    def set_threads(self, threads: int) -> None:
        self._threads = threads

    def facts(self, hardware: HardwareSpec) -> BackendFacts:
        """The C kernel contract (``contract.py``) with the lists the checks and the compiler
        use, for the compiler ``CC`` names."""
        try:
            cc = compiler_for(settings.c_compiler())
            command, version = " ".join(cc.command), f", compiled by {cc.version}"
        except CompilerNotFoundError:  # this machine's flags, as if CC were there
            cc = Compiler(command=(settings.c_compiler(),), version="")
            command, version = settings.c_compiler(), ""
        return BackendFacts(
            backend=self.name,
            language=registry.record(self.name).language,
            toolchain=f"C11 + OpenMP{version}",
            contract=contract_text(cc.arch, hardware.cores),
            compile_command=compile_command(command, cc),
            allowed_headers=allowed_headers(cc.arch),
            forbidden=forbidden_rules(cc.arch),
            ceilings=describe_ceilings(hardware, matmul="matmul (FMA)", cores="cores/threads"),
        )

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
            return vectorization_remarks(build_inputs(source, problem, sizes, compiler))
