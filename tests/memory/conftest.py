"""Helpers for the memory tests: experiences made in one line, and a fresh store."""

from __future__ import annotations

from accelopt.memory.records import Experience, Lesson


def make_experience(
    title: str,
    description: str = "",
    *,
    speedup: float = 1.5,
    problem: str = "matmul",
    run_id: str = "run-1",
    kind: str = "positive",
    before: str = "",
    after: str = "",
    fast_hash: str = "",
) -> Experience:
    return Experience(
        lesson=Lesson(title, description or title, before, after),
        kind=kind,
        speedup=speedup,
        problem=problem,
        backend="cpu",
        hardware="test-cpu",
        model="scripted",
        run_id=run_id,
        slow_hash="slow-" + title[:8],
        fast_hash=fast_hash or "fast-" + title[:8],
    )
