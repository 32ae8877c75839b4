"""A run budget in dollars and/or tokens: new calls are refused cleanly once it is reached."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Budget:
    max_usd: float | None = None
    max_tokens: int | None = None
    spent_usd: float = 0.0
    spent_tokens: int = 0
    unknown_cost_calls: int = 0  # calls whose dollars could not be counted
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def exhausted(self) -> str:
        """Why no new call may start, or '' while the budget allows it."""
        with self._lock:
            if self.max_usd is not None and self.spent_usd >= self.max_usd:
                return f"budget reached: ${self.spent_usd:.4f} of ${self.max_usd:g} spent"
            if self.max_tokens is not None and self.spent_tokens >= self.max_tokens:
                return f"budget reached: {self.spent_tokens} of {self.max_tokens} tokens used"
            return ""

    def charge(self, cost_usd: float | None, tokens: int) -> None:
        with self._lock:
            self.spent_tokens += tokens
            if cost_usd is None:
                self.unknown_cost_calls += 1
            else:
                self.spent_usd += cost_usd
