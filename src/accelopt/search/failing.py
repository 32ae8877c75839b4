"""A run whose endpoint fails stops, and says why: the LLM calls of each step, tallied as they
return.

When every call an iteration sent failed (none answered, replays included; a call the budget
refused was never sent and does not count), the loop stops before committing the iteration: the
run ends ``failed`` with one sentence naming the agent, the endpoint and the last error, and is
resumed from that iteration once the endpoint answers (what earlier iterations measured and paid
for stays in the store). The command line exits with ``cli.optimize.ENDPOINT_FAILED_EXIT``.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelopt.errors import UserError
from accelopt.llm.budget import Budget
from accelopt.llm.chat import ChatModel
from accelopt.llm.records import LLMCall, Message

ERROR_SHOWN = 200  # the most of the last error a stop sentence quotes


class EndpointFailedError(UserError):
    """Every LLM call of a step that cannot stop partway (drafting a first kernel) failed."""


@dataclass
class CallTally:
    """A ``ChatModel`` that passes each call on to ``client`` and counts how they came back."""

    client: ChatModel
    answered: int = 0
    failed: int = 0
    last_failed: LLMCall | None = None

    @property
    def budget(self) -> Budget | None:
        return self.client.budget

    async def complete(self, agent: str, messages: list[Message], sample_index: int = 0) -> LLMCall:
        call = await self.client.complete(agent, messages, sample_index)
        if call.ok:
            self.answered += 1
        elif call.attempts > 0:  # sent, and failed (a budget refusal is never sent)
            self.failed += 1
            self.last_failed = call
        return call

    def reset(self) -> None:
        self.answered, self.failed, self.last_failed = 0, 0, None

    def all_failed(self) -> bool:
        """Whether calls were sent since the last reset and every one failed."""
        return self.failed > 0 and self.answered == 0

    def sentence(self, step: str, run_id: str) -> str:
        """Why the run stopped: the step, the last failed call's agent, endpoint and error."""
        call = self.last_failed
        assert call is not None, "no call failed"
        error = call.error if len(call.error) <= ERROR_SHOWN else call.error[:ERROR_SHOWN] + "…"
        return (
            f"the LLM endpoint failed: every call of {step} failed ({self.failed}), the last the "
            f"{call.agent}'s to {call.base_url} ({call.model}) after {call.attempts} attempts "
            f"with {error}; run {run_id} stopped as failed and keeps what it measured: once the "
            f"endpoint answers, resume it with `accelopt optimize --resume {run_id}`"
        )
