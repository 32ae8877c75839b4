"""`accelopt llm check` against the scripted server, as a user runs it."""

from __future__ import annotations

import json

import pytest

from accelopt.testing.scripted import Reply, ScriptedServer

pytestmark = pytest.mark.timeout(120)


def write_config(tmp_path, base_url: str, **default) -> str:
    fields = {"base_url": base_url, "model": "m", **default}
    text = "llm:\n  default: {" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in fields.items())
    text += "}\n  planner: {price_in: 1.0, price_out: 2.0}\n  executor: {model: coder}\n"
    path = tmp_path / "accelopt.yaml"
    path.write_text(text)
    return str(path)


def test_every_agent_answers(run_cli, tmp_path):
    with ScriptedServer(default=Reply("OK", prompt_tokens=10, completion_tokens=1)) as server:
        out = run_cli("llm", "check", "--config", write_config(tmp_path, server.base_url))
        rows = json.loads(
            run_cli(
                "llm", "check", "--config", write_config(tmp_path, server.base_url), "--json", "-"
            ).stdout
        )
    assert out.returncode == 0, out.stderr
    for text in ("planner", "executor", "fixer", "summarizer", "coder", "ok", "unknown"):
        assert text in out.stdout
    by_agent = {r["agent"]: r for r in rows}
    assert by_agent["planner"]["cost_usd"] == pytest.approx(12e-6)
    assert by_agent["executor"]["cost_usd"] is None  # no price known: unknown, not 0
    assert all(r["ok"] and r["tokens_in"] == 10 for r in rows)


def test_a_refused_key_is_one_sentence_and_exit_1(run_cli, tmp_path):
    with ScriptedServer(default=Reply("OK"), api_key="right") as server:
        config = write_config(tmp_path, server.base_url, api_key_env="MY_LLM_KEY")
        out = run_cli("llm", "check", "--config", config, env={"MY_LLM_KEY": "wrong"})
    assert out.returncode == 1
    assert "refused the API key: check the variable MY_LLM_KEY" in out.stderr
    assert "Traceback" not in out.stderr


def test_an_unreachable_server_is_one_sentence_and_exit_1(run_cli, tmp_path):
    out = run_cli("llm", "check", "--config", write_config(tmp_path, "http://127.0.0.1:9/v1"))
    assert out.returncode == 1
    assert "cannot reach http://127.0.0.1:9/v1" in out.stderr and "Traceback" not in out.stderr


def test_an_invalid_config_is_a_usage_error(run_cli, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("llm: {default: {temperature: hot}}\n")
    out = run_cli("llm", "check", "--config", str(path))
    assert out.returncode == 2 and "llm.default.temperature" in out.stderr
