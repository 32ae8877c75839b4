"""A run budget in dollars and/or tokens: new calls are refused cleanly once it is reached.

What was spent comes in from the store (``Store.spent`` over every session of the run, or of all
the runs of one ``--suite``), so a resumed run does not start again at $0. Before a call the
client reserves an estimate of what it may cost (its prompt and its ``max_tokens`` at the
endpoint's price); a call may start only while spent + reserved is below the limit. So calls
running at once cannot together overshoot the budget by more than one call's worth.
"""

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
    reserved_usd: float = 0.0
    reserved_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _refusal(self, usd: float, tokens: int) -> str:
        if self.max_usd is not None and usd >= self.max_usd:
            return f"budget reached: ${self.spent_usd:.4f} of ${self.max_usd:g} spent"
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return f"budget reached: {self.spent_tokens} of {self.max_tokens} tokens used"
        return ""

    def exhausted(self) -> str:
        """Why no new call may start, or '' while the budget allows it (spent only)."""
        with self._lock:
            return self._refusal(self.spent_usd, self.spent_tokens)

    def reserve(self, usd: float, tokens: int) -> str:
        """Hold ``usd`` and ``tokens`` for a call about to start, or say why it may not: the
        budget is reached counting the calls already running."""
        with self._lock:
            refusal = self._refusal(
                self.spent_usd + self.reserved_usd, self.spent_tokens + self.reserved_tokens
            )
            if not refusal:
                self.reserved_usd += usd
                self.reserved_tokens += tokens
            return refusal

    def release(self, usd: float, tokens: int) -> None:
        """Give back a reservation (the call ended: what it cost is charged apart)."""
        with self._lock:
            self.reserved_usd = max(0.0, self.reserved_usd - usd)
            self.reserved_tokens = max(0, self.reserved_tokens - tokens)

    def charge(self, cost_usd: float | None, tokens: int) -> None:
        with self._lock:
            self.spent_tokens += tokens
            if cost_usd is None:
                self.unknown_cost_calls += 1
            else:
                self.spent_usd += cost_usd
