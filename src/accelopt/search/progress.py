"""Live progress of a run: iteration, best latency and % of peak, $ spent, candidates by status."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rich.console import Console
from rich.live import Live
from rich.text import Text

from accelopt.backends.status import Status
from accelopt.formatting import milliseconds, percent, usd


@dataclass
class Progress:
    """What the loop reports; ``render`` is pure, ``Live`` shows it when a console is given."""

    problem: str
    iterations: int
    iteration: int = 0
    phase: str = ""  # what the loop does now, e.g. "planning iteration 2"
    best_latency_s: float | None = None
    best_pct: float | None = None
    spent_usd: float = 0.0
    unknown_cost_calls: int = 0
    evaluated: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    console: Console | None = None
    _live: Live | None = None

    def render(self) -> Text:
        best = milliseconds(self.best_latency_s, " ms")
        pct = percent(self.best_pct)
        failed = ", ".join(
            f"{s} {n}" for s, n in sorted(self.statuses.items()) if s != Status.PASSED
        )
        unknown = self.unknown_cost_calls
        cost = usd(self.spent_usd) + (f" (+{unknown} calls, price unknown)" if unknown else "")
        doing = f" | {self.phase}" if self.phase else ""
        return Text(
            f"{self.problem}: iteration {self.iteration}/{self.iterations}{doing} | best {best} "
            f"({pct} of peak) | {cost} | evaluated {self.evaluated}"
            + (f" | failed: {failed}" if failed else "")
        )

    def start(self) -> None:
        if self.console is not None:
            self._live = Live(self.render(), console=self.console, refresh_per_second=4)
            self._live.start()

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.render())

    def stop(self) -> None:
        if self._live is not None:
            self._live.update(self.render())
            self._live.stop()
            self._live = None
            if self.console is not None and not self.console.is_terminal:
                self.console.line()  # Live leaves its last line open where it cannot redraw
