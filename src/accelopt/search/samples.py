"""The sample index of each LLM call of a run: where in the loop the call was made.

Every call site of an agent in a run has its own sample index, so that replay (keyed by model,
prompt and sample index) answers a call only from that same call of a killed session, never from
a sibling that happened to get the same prompt. With ``STRIDE`` = 1000 and, in iteration ``t``,
``slot = n × K + k`` (plan ``n`` of a parent, kernel ``k`` of the K written for it):

- planner: ``t × STRIDE + n`` (``planner``; ``decode`` gives back ``(t, n)``, which the reports
  use to tell which iteration a call was made in);
- executor: ``t × STRIDE² + slot``, and ``+ REASK`` when asked again after a reply without code
  (``executor``);
- fixer: ``t × STRIDE² + slot × STRIDE + round`` (``fixer``);
- summarizer: ``t`` (``summarizer``).

A run's first kernel, drafted from the reference, is iteration 0's: executor ``slot``, fixer
``slot × STRIDE + round``. The values are recorded with every call (``LLMCall.sample_index``) and
are part of its replay key: they must never change.
"""

from __future__ import annotations

STRIDE = 1000
REASK = STRIDE**2 // 2  # an executor asked again after a reply without code: + slot


def planner(iteration: int, n: int) -> int:
    """The index of the ``n``-th planner call of ``iteration``."""
    return iteration * STRIDE + n


def decode(index: int) -> tuple[int, int]:
    """``(iteration, n)`` of a planner call's index: the inverse of ``planner``."""
    iteration, n = divmod(index, STRIDE)
    return iteration, n


def executor(iteration: int, slot: int, again: bool = False) -> int:
    """The index of the executor call that writes kernel ``slot`` of ``iteration`` (``again``:
    the second asking, after a reply without code)."""
    return iteration * STRIDE**2 + slot + (REASK if again else 0)


def fixer(iteration: int, slot: int, round_: int) -> int:
    """The index of repair round ``round_`` of kernel ``slot`` of ``iteration``."""
    return iteration * STRIDE**2 + slot * STRIDE + round_


def summarizer(iteration: int) -> int:
    """The index of the summarizer calls of ``iteration``."""
    return iteration
