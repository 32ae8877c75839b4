"""Fixtures for the report tests: a store holding a fake run, and the scripted agent team of
tests/search (its agents_pool module) on a local server for the end-to-end runs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "search"))
sys.path.append(str(Path(__file__).parent))

from agents_pool import AgentPool, write_config
from report_helpers import make_fake_run

from accelopt.llm.config import load_config
from accelopt.store.store import Store
from accelopt.testing.scripted import ScriptedServer


@pytest.fixture()
def fake_store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "ws") as store:
        make_fake_run(store)
        yield store


# -- the scripted team (tests/search) -------------------------------------------------------------


@pytest.fixture()
def script() -> AgentPool:
    return AgentPool()


@pytest.fixture()
def llm(tmp_path: Path, server: ScriptedServer):
    return load_config(write_config(tmp_path / "accelopt.yaml", server.base_url))
