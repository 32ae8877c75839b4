"""The ``Lesson`` record: what the summarizer learned from one slow→fast pair."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lesson:
    title: str
    description: str  # generalizable: when it applies and why it helps
    before: str = ""  # a short snippet of the slow kernel
    after: str = ""  # the same spot in the fast kernel
