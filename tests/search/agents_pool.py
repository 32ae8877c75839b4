"""A scripted team of agents for the loop tests: plans that name kernel variants, an executor
that writes the named variant, a fixer that repairs, a summarizer that writes lessons. Variants
are real C kernels for matmul (tests/search/variants/), so the loop measures real speedups."""

from __future__ import annotations

import itertools
import re
import threading
from pathlib import Path

from accelopt.testing.scripted import RecordedRequest, Reply

VARIANTS = Path(__file__).parent / "variants"
PLAN_ORDER = ("good", "slower", "broken", "wrong", "fast")


def variant(name: str) -> str:
    return (VARIANTS / f"matmul_{name}.c").read_text()


class AgentPool:
    """The responder for a ScriptedServer: dispatches on the agent's model name."""

    def __init__(
        self, plan_order: tuple[str, ...] = PLAN_ORDER, pause_after_plans: int = 0
    ) -> None:
        self._plans = itertools.cycle(plan_order)
        self._lock = threading.Lock()
        self._planned = 0
        # With pause_after_plans=N, the first executor request after more than N planner requests
        # hangs (30 s) and sets `paused`: a planner call beyond the Nth has been paid by then
        # (its plan is what the executor carries out), however many other calls came before.
        self.pause_after_plans = pause_after_plans
        self.paused = threading.Event()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._planned += request.model == "planner"
            hang = (
                self.pause_after_plans > 0
                and request.model == "executor"
                and self._planned > self.pause_after_plans
                and not self.paused.is_set()
            )
            if hang:
                self.paused.set()
        if hang:
            return Reply.slow("too late", 30.0)
        return getattr(self, request.model)(request)

    def planner(self, request: RecordedRequest) -> Reply:
        with self._lock:
            name = next(self._plans)
        return Reply(f"TITLE: variant {name}\nSTEPS:\n1. Rewrite the kernel as variant {name}.\n")

    def executor(self, request: RecordedRequest) -> Reply:
        prompt = request.messages[-1]["content"]
        name = re.search(r"Plan to carry out: variant (\w+)", prompt).group(1)  # type: ignore[union-attr]
        return Reply(f"Here is the kernel.\n```c\n{variant(name)}```\n")

    def fixer(self, request: RecordedRequest) -> Reply:
        return Reply(f"Fixed.\n```c\n{variant('fixed')}```\n")

    def summarizer(self, request: RecordedRequest) -> Reply:
        prompt = request.messages[-1]["content"]
        speedup = re.search(r"measured ([\d.]+)x faster", prompt).group(1)  # type: ignore[union-attr]
        kind = "loop order" if "i-k-j" in prompt else "redundant work"
        return Reply(
            f"TITLE: Lesson on {kind} ({speedup}x)\n"
            f"LESSON: Stream rows of rhs with the i-k-j {kind} change; it measured {speedup}x.\n"
            "BEFORE:\n```c\nacc += lhs[i*K+k] * rhs[k*N+j];\n```\n"
            "AFTER:\n```c\no[j] += a * r[j];\n```\n"
        )


def write_config(path: Path, base_url: str) -> Path:
    agents = "".join(
        f"  {a}: {{model: {a}}}\n" for a in ("planner", "executor", "fixer", "summarizer")
    )
    path.write_text(
        "llm:\n"
        f"  default: {{base_url: '{base_url}', model: m, max_retries: 2, retry_base_s: 0,"
        " price_in: 1.0, price_out: 2.0}\n" + agents
    )
    return path
