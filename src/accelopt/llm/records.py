"""The ``LLMCall`` record: one chat completion as it happened, paid for or replayed."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

Message = dict[str, str]


def replay_key(model: str, messages: list[Message], params: dict[str, Any], sample: int) -> str:
    """What identifies a call for replay: model, messages, sampling parameters, sample index."""
    payload = json.dumps([model, messages, params, sample], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class LLMCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    key: str  # replay_key(...)
    agent: str
    model: str
    base_url: str
    messages: list[Message]
    params: dict[str, Any]
    sample_index: int = 0
    reply: str = ""
    reasoning: str | None = None
    finish_reason: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    cost_usd: float | None = None  # None: the price is unknown
    error: str = ""  # empty when the call succeeded
    attempts: int = 0
    replayed: bool = False
    started_at: str = ""

    @property
    def ok(self) -> bool:
        return not self.error
