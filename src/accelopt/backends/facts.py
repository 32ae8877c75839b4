"""What an agent must know about a backend: the kernel contract and the device's ceilings.

Each backend builds its ``BackendFacts`` (``Backend.facts``) from the lists its own checks and
compiler use, so that a prompt never drifts from what the harness enforces, and a new backend
needs no change in the agents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: keeps pydantic out of worker processes
    from accelopt.hardware.spec import HardwareSpec

GIGA = 1e9
MIB = 2**20

ROOFLINE_RULE = (
    "roofline: peak time = max(matmul_flops / matmul rate, vector_flops / vector rate, "
    "bytes / bandwidth); % of peak = peak time / measured latency"
)


@dataclass(frozen=True, kw_only=True)
class BackendFacts:
    """The kernel contract of a backend and the ceilings of the device it runs on.

    ``contract``, ``forbidden`` and ``ceilings`` are written for a prompt: ``contract`` is a few
    precise lines, ``forbidden`` one rule per line as the checks enforce them, ``ceilings`` one line
    per ceiling with where its figure came from. A kernel that is not built ahead (Python) has
    no compile command and no headers.
    """

    backend: str
    language: str  # the code-fence tag of kernel sources: "c", "python"
    toolchain: str  # for people and prompts: "C11 + OpenMP, compiled by gcc 12.2"
    contract: str
    ceilings: str
    compile_command: str = ""
    allowed_headers: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()

    def render(self) -> str:
        """A compact Markdown block for a prompt."""
        parts = [
            f"## Backend `{self.backend}`: {self.toolchain}",
            "",
            "### Kernel contract",
            self.contract.strip(),
        ]
        if self.compile_command:
            parts += ["", "### Build", f"`{self.compile_command}`"]
        if self.allowed_headers:
            headers = ", ".join(f"<{h}>" for h in self.allowed_headers)
            parts += ["", "### Allowed headers", headers]
        if self.forbidden:
            parts += ["", "### Rejected (static and symbol checks)"]
            parts += [f"- {rule}" for rule in self.forbidden]
        parts += ["", "### Device ceilings", self.ceilings.strip(), ROOFLINE_RULE]
        return "\n".join(parts) + "\n"


def _source(hardware: HardwareSpec, field: str) -> str:
    return hardware.provenance.get(field) or "source not recorded"


def describe_ceilings(
    hardware: HardwareSpec, *, matmul: str = "matmul", cores: str = "cores"
) -> str:
    """One line per ceiling of ``hardware``, each with its provenance (rates in 10^9 units)."""
    lines = [
        f"device: {hardware.name}",
        f"{matmul} {hardware.matmul_rate / GIGA:,.1f} GFLOP/s — {_source(hardware, 'matmul_rate')}",
        f"vector {hardware.vector_rate / GIGA:,.1f} GFLOP/s — {_source(hardware, 'vector_rate')}",
        f"memory bandwidth {hardware.bandwidth / GIGA:,.1f} GB/s — "
        f"{_source(hardware, 'bandwidth')}",
        f"{cores} {hardware.cores} — {_source(hardware, 'cores')}",
    ]
    lines += describe_machine(hardware)
    return "\n".join(lines)


def _size(n: int) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB else f"{n / 2**10:g} KiB"


def _cache_line(hardware: HardwareSpec) -> str:
    caches = []
    for label, field in (("L1d", "l1d_bytes"), ("L2", "l2_bytes"), ("last-level", "llc_bytes")):
        size = getattr(hardware, field)
        if size:
            where = _source(hardware, field).rpartition(", ")[2]
            sharing = f" ({where})" if "core" in where or "shared" in where else ""
            caches.append(f"{label} {_size(size)}{sharing}")
    return "caches: " + ", ".join(caches) if caches else ""


def describe_machine(hardware: HardwareSpec) -> list[str]:
    """What a kernel engineer asks after the ceilings: the vector ISA kernels are compiled for,
    the caches, and whether inputs arrive cold (lines for a prompt; [] for a device without
    these facts)."""
    from accelopt.backends.buffers import COLD_SPAN_BYTES
    from accelopt.hardware.isa import Isa, describe_isa

    lines = []
    if hardware.arch:
        isa = Isa(hardware.arch, tuple(hardware.isa), hardware.vector_bits or 0, ())
        lines.append(f"vector ISA: {describe_isa(isa)} — {_source(hardware, 'isa')}")
    if cache_line := _cache_line(hardware):
        lines.append(cache_line)
    if hardware.on_host:
        lines.append(
            "inputs are cold: the timed calls rotate input/output sets spanning at least "
            f"{COLD_SPAN_BYTES // MIB} MiB, so nothing stays in cache from one call to the next; "
            "block for L1/L2 within a call, and count on every input byte coming from memory"
        )
    return lines
