"""The API with the dashboard's views over a store, served in a thread (tests/serve)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _NoJobs:
    capacity, max_queued = 1, 1

    def counts(self) -> dict[str, int]:
        return {}


@contextmanager
def dashboard_over(store: Any, token: str, serve_in_thread: Any) -> Iterator[str]:
    """The API with the dashboard's views over ``store`` (a real uvicorn in a thread, no
    evaluation queue), ``token`` its token: its base URL."""
    from accelopt.cli.runs import run_row
    from accelopt.serve.api import Views, create_app
    from accelopt.serve.dashboard import live_json

    views = Views(
        problems=lambda: [],
        problem=lambda name: {},
        runs=lambda: [run_row(store, r) for r in store.list_runs()],
        run=lambda run_id: None,
        live=lambda run_id: live_json(store, run_id),
    )
    with serve_in_thread(create_app(_NoJobs(), views, token)) as url:
        yield url
