"""The LLM configuration: inheritance from the default, env overrides, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt.errors import UserError
from accelopt.llm.config import AGENTS, Config, load_config


@pytest.fixture(autouse=True)
def no_overrides(monkeypatch):
    for var in ("ACCELOPT_LLM_BASE_URL", "ACCELOPT_LLM_MODEL", "ACCELOPT_LLM_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "accelopt.yaml"
    path.write_text(text)
    return path


def test_agents_inherit_the_default_and_override_fields(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_KEY", "secret")
    path = write(
        tmp_path,
        """
llm:
  default: {base_url: "http://h:8000/v1", model: gpt-oss-120b, api_key_env: VLLM_KEY,
            temperature: 0.5}
  executor: {model: qwen3-coder, temperature: 0.2, price_in: 0.1, price_out: 0.3, concurrency: 3}
budget: {max_usd: 2.5}
""",
    )
    config = load_config(path)
    planner, executor = config.endpoint("planner"), config.endpoint("executor")
    assert (planner.model, planner.temperature, planner.api_key) == ("gpt-oss-120b", 0.5, "secret")
    assert executor.base_url == "http://h:8000/v1" and executor.model == "qwen3-coder"
    assert (executor.temperature, executor.concurrency, executor.price_in) == (0.2, 3, 0.1)
    assert config.budget.max_usd == 2.5
    assert "secret" not in repr(planner)  # keys never show in logs
    assert set(AGENTS) == {"planner", "executor", "fixer", "summarizer"}


def test_environment_overrides_the_default_endpoint(tmp_path, monkeypatch):
    path = write(tmp_path, "llm: {default: {base_url: 'http://a/v1', model: a}}\n")
    monkeypatch.setenv("ACCELOPT_LLM_BASE_URL", "http://b/v1")
    monkeypatch.setenv("ACCELOPT_LLM_MODEL", "b")
    monkeypatch.setenv("ACCELOPT_LLM_API_KEY", "k")
    endpoint = load_config(path).endpoint("fixer")
    assert (endpoint.base_url, endpoint.model, endpoint.api_key) == ("http://b/v1", "b", "k")


def test_no_config_file_and_no_env_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="no LLM base_url for the planner"):
        load_config().endpoint("planner")


def test_local_servers_need_no_key():
    config = Config.model_validate({"llm": {"default": {"base_url": "http://x/v1", "model": "m"}}})
    assert config.endpoint("summarizer").api_key == "not-needed"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("llm: {default: {temperature: 9}}", "llm.default.temperature"),
        ("llm: {planner: {modle: x}}", "llm.planner.modle"),
        ("llm: {wizard: {}}", "llm.wizard"),
        ("budget: {max_usd: -1}", "budget.max_usd"),
        ("llm: [unclosed", "not valid YAML"),
    ],
)
def test_invalid_config_names_the_field(tmp_path, text, message):
    with pytest.raises(UserError, match=message.replace(".", r"\.")):
        load_config(write(tmp_path, text))


def test_missing_named_file_and_missing_key_variable(tmp_path, monkeypatch):
    with pytest.raises(UserError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    monkeypatch.delenv("NOPE_KEY", raising=False)
    config = load_config(
        write(
            tmp_path, "llm: {default: {base_url: 'http://x/v1', model: m, api_key_env: NOPE_KEY}}"
        )
    )
    with pytest.raises(UserError, match="NOPE_KEY"):
        config.endpoint("planner")
