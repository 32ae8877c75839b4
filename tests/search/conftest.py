"""Fixtures for the loop tests: a scripted agent team on a local server, a workspace, fast
evaluation settings, and the slow matmul variant to start from."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agents_pool import AgentPool, variant, write_config

from accelopt.llm.config import load_config
from accelopt.profiling.config import EvalConfig
from accelopt.testing.scripted import ScriptedServer

FAST_EVAL = EvalConfig(seeds=2, min_calls=5, min_time_s=0.02, workers=2)


@pytest.fixture()
def pool() -> AgentPool:
    return AgentPool()


@pytest.fixture()
def script(pool: AgentPool) -> AgentPool:
    return pool


@pytest.fixture()
def config_path(tmp_path: Path, server: ScriptedServer) -> Path:
    return write_config(tmp_path / "accelopt.yaml", server.base_url)


@pytest.fixture()
def llm(config_path: Path):
    return load_config(config_path)


@pytest.fixture()
def fake_evaluations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs started in this process evaluate with fake_runner.py (fixed latencies per variant,
    no compiler): for tests of what the loop decides and records, not of what it measures."""
    from fake_runner import fake_profiler

    from accelopt.search import run as run_module

    monkeypatch.setattr(run_module, "make_profiler", fake_profiler)


@pytest.fixture()
def slow_start(tmp_path: Path) -> Path:
    path = tmp_path / "slow.c"
    path.write_text(variant("slow"))
    return path
