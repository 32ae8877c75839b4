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


@dataclass(frozen=True)
class BackendFacts:
    """The kernel contract of a backend and the ceilings of the device it runs on.

    ``contract``, ``forbidden`` and ``ceilings`` are written for a prompt: ``contract`` is a few
    precise lines, ``forbidden`` one rule per line as the checks enforce them, ``ceilings`` one line
    per ceiling with where its figure came from.
    """

    backend: str
    language: str  # the code-fence tag of kernel sources: "c", "python"
    toolchain: str  # for people and prompts: "C11 + OpenMP, compiled by gcc 12.2"
    contract: str
    compile_command: str
    allowed_headers: tuple[str, ...]
    forbidden: tuple[str, ...]
    ceilings: str

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
    if hardware.llc_bytes:
        lines.append(
            f"last-level cache {hardware.llc_bytes / MIB:g} MiB — {_source(hardware, 'llc_bytes')}"
        )
    return "\n".join(lines)
