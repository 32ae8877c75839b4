"""How an evaluation is run: seeds, timing effort, limits. One typed record, loaded once."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# Bumped whenever a change to the harness can change a verdict or a timing: it is part of the
# evaluation cache key, so results measured by an older harness are not reused.
HARNESS_VERSION = "1"


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
    threads: int | None = Field(
        None, ge=1, description="OpenMP threads; None = cores of the device"
    )
    compile_timeout_s: float = Field(120.0, gt=0)
    call_timeout_floor_s: float = Field(10.0, gt=0, description="a call may always take this long")
    call_timeout_factor: float = Field(2000.0, gt=0, description="... or this many roofline times")
    memory_cap_bytes: int = Field(
        2 << 30, gt=0, description="memory a kernel may map beyond its buffers"
    )
    rotation_budget_bytes: int = Field(
        1 << 30, gt=0, description="memory for rotated input/output sets"
    )
    output_cap_bytes: int = Field(
        16 << 10, gt=0, description="kernel stdout/stderr kept in the log"
    )
    workers: int = Field(2, ge=1, description="worker processes in the pool")
    recycle_after: int = Field(50, ge=1, description="replace a worker after this many evaluations")

    def call_timeout_s(self, peak_s: float) -> float:
        """A kernel call's deadline: scaled from the roofline time, never under the floor."""
        return max(self.call_timeout_floor_s, self.call_timeout_factor * peak_s)
