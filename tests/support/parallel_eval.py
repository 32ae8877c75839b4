"""Evaluations of several jobs at once across an evaluator's pool, for tests that check many
kernels (the search submits its own; nothing in accelopt needs this)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from accelopt.profiling.evaluation import Evaluation


def evaluate_in_parallel(evaluator: Any, jobs: Iterable[tuple[Any, ...]]) -> Iterator[Evaluation]:
    """Each job evaluated in parallel (``evaluator.evaluate(*job)``), in the order of ``jobs``."""
    with ThreadPoolExecutor(max_workers=evaluator.config.workers) as pool:
        futures = [pool.submit(evaluator.evaluate, *job) for job in jobs]
        for future in futures:
            yield future.result()
