"""How an evaluation is run: seeds, timing effort, limits. One typed record, loaded once."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PACKAGE = Path(__file__).resolve().parents[1]  # src/accelopt
# The code a verdict or a timing depends on: the harness, the backends and their checks, the
# ceilings and the roofline, the problems with their references and kernels.
HARNESS_PARTS = ("profiling", "backends", "hardware", "problems")
HARNESS_SUFFIXES = (".py", ".c", ".h")


class EvalConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seeds: int = Field(5, ge=1, description="fresh input seeds for the correctness check")
    seed: int | None = Field(None, description="base seed; None draws fresh seeds every time")
    check_only: bool = Field(False, description="check correctness, skip timing")
    warmup_calls: int = Field(3, ge=0, description="untimed calls before timing")
    min_calls: int = Field(20, ge=1, description="timed calls, at least")
    min_time_s: float = Field(0.2, ge=0, description="seconds of timed calls, at least")
    max_time_s: float = Field(
        30.0, gt=0, description="stop timing after this long, even short of min_calls"
    )
    ci_target: float = Field(
        0.01,
        ge=0,
        description="keep timing until the median's 95 % interval is within ± this fraction...",
    )
    ci_time_cap_s: float = Field(
        2.0, ge=0, description="... or timing has taken this long (min_calls, min_time first)"
    )
    detect_disturbance: bool = Field(
        True,
        description="leave out timed batches in which a thread of the kernel or of the timing "
        "waited for a CPU another process held (run delay, worker/disturbance.py)",
    )
    disturbed_wait_s: float = Field(
        10.0,
        ge=0,
        description="timing goes on this long past ci_time_cap_s for enough clean batches on a "
        "busy machine; with too few then, the measurement says it is disturbed",
    )
    verify_calls: int = Field(
        2, ge=0, description="timed calls, drawn at random, checked against the reference"
    )
    full_batches: Literal["auto", "all", "some"] = Field(
        "auto",
        description="timed batches on inputs rewritten throughout: all, some at random (compared "
        "with the rest), or auto: all where rewriting costs little beside a call (freshness.py)",
    )
    headline: Literal["compute", "all", "cached"] = Field(
        "compute",
        description="which % of peak the search and the tables use: the calibrated one for "
        "compute-bound problems (matmul, vector: measured steadier than the cached ceiling's), "
        "for all, or none (cached); the other is reported beside it",
    )
    threads: int | None = Field(
        None, ge=1, description="OpenMP threads; None = cores of the device"
    )
    compile_timeout_s: float = Field(120.0, gt=0)
    lock_timeout_s: float = Field(
        900.0, gt=0, description="waiting for the device (another evaluation's timing) at most"
    )
    call_timeout_floor_s: float = Field(10.0, gt=0, description="a call may always take this long")
    call_timeout_factor: float = Field(
        2000.0, gt=0, description="... or this many roofline times (the correctness calls)"
    )
    timing_call_factor: float = Field(
        50.0, gt=0, description="a timed call may take this many times the slowest checked call"
    )
    memory_cap_bytes: int = Field(
        2 << 30, gt=0, description="memory a kernel may map beyond its buffers"
    )
    rotation_budget_bytes: int = Field(
        1 << 30, gt=0, description="memory for rotated input/output sets"
    )
    reference_memory_bytes: int = Field(
        1 << 30, ge=0, description="inputs and references a worker keeps in memory"
    )
    reference_disk_bytes: int = Field(
        4 << 30, ge=0, description="inputs and references kept on disk (0: none)"
    )
    host_memory_bytes: int = Field(
        512 << 20,
        ge=0,
        description="arrays a worker keeps to read kernels' buffers back into (0: new each time)",
    )
    output_cap_bytes: int = Field(
        16 << 10, gt=0, description="kernel stdout/stderr kept in the log"
    )
    workers: int = Field(2, ge=1, description="worker processes in the pool")
    recycle_after: int = Field(50, ge=1, description="replace a worker after this many evaluations")

    def call_timeout_s(self, peak_s: float) -> float:
        """A kernel call's deadline before it has run: scaled from the roofline time, never under
        the floor."""
        return max(self.call_timeout_floor_s, self.call_timeout_factor * peak_s)


def harness_digest(root: Path = PACKAGE, parts: tuple[str, ...] = HARNESS_PARTS) -> str:
    """A short hash of the harness's own sources and default settings: it changes by itself
    whenever the code that can change a verdict or a timing changes (no hand-bumped version)."""
    digest = hashlib.sha256(EvalConfig().model_dump_json().encode())
    for part in parts:
        for path in sorted((root / part).rglob("*")):
            if path.suffix in HARNESS_SUFFIXES and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


# Part of the evaluation cache key, so results measured by another harness are never reused.
HARNESS_VERSION = harness_digest()


def harness_key(problem_fingerprint: str = "") -> str:
    """The harness version an evaluation is cached under: the harness's own, and for a
    workspace problem (which the harness digest does not cover) its fingerprint too."""
    if not problem_fingerprint:
        return HARNESS_VERSION
    return f"{HARNESS_VERSION}+{problem_fingerprint}"
