"""Where calls go: the recorder interface, a JSONL recorder, and the replay index.

Each call is appended and flushed as soon as it returns, so nothing paid for is lost to a crash.
The store (``store.calls.StoreRecorder``) implements the same protocol and holds paid calls.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from accelopt.llm.records import LLMCall


class Recorder(Protocol):
    def hold(self, key: str, usd: float, tokens: int) -> str:
        """Hold a paid call from before its request is sent until it is recorded, so that a
        call a kill cut off still counts against the budget (the store's); the hold's id, or ""
        where this recorder keeps none."""
        ...

    def record(self, call: LLMCall, hold: str = "") -> None:
        """Keep ``call`` (and release ``hold``, the id ``hold`` gave for it)."""
        ...

    def find(self, key: str) -> LLMCall | None:
        """A successful recorded call with this replay key, for replay."""
        ...


class NoHolds:
    """A recorder that keeps no holds: a kill loses only what was in flight."""

    def hold(self, key: str, usd: float, tokens: int) -> str:
        return ""


class MemoryRecorder(NoHolds):
    """Keeps calls in memory (tests, one-off commands)."""

    def __init__(self) -> None:
        self.calls: list[LLMCall] = []
        self._lock = threading.Lock()

    def record(self, call: LLMCall, hold: str = "") -> None:
        with self._lock:
            self.calls.append(call)

    def find(self, key: str) -> LLMCall | None:
        with self._lock:
            return next((c for c in self.calls if c.key == key and c.ok and not c.replayed), None)


class JsonlRecorder(NoHolds):
    """Appends one JSON line per call; on open, indexes the file's successful calls for replay."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._index: dict[str, LLMCall] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                self._index_line(line)
        path.parent.mkdir(parents=True, exist_ok=True)

    def _index_line(self, line: str) -> None:
        try:
            call = LLMCall.model_validate_json(line)
        except ValidationError:
            return  # a line cut short by a crash: skip it
        if call.ok and not call.replayed:
            self._index.setdefault(call.key, call)

    def record(self, call: LLMCall, hold: str = "") -> None:
        line = call.model_dump_json() + "\n"
        with self._lock, open(self.path, "a") as f:
            f.write(line)
            f.flush()
            if call.ok and not call.replayed:
                self._index.setdefault(call.key, call)

    def find(self, key: str) -> LLMCall | None:
        with self._lock:
            return self._index.get(key)
