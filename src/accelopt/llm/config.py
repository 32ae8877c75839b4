"""The configuration of the agents' LLM endpoints: one YAML file, loaded once, typed.

```yaml
llm:
  default:  {base_url: http://localhost:8000/v1, model: openai/gpt-oss-120b, api_key_env: VLLM_KEY}
  executor: {model: Qwen/Qwen3-Coder-30B-A3B-Instruct, temperature: 0.2, price_in: 0.1}
budget: {max_usd: 5.0, max_tokens: 20000000}
```
Agents left out inherit ``llm.default``; fields left out inherit from the default, then from the
built-in defaults below. ``ACCELOPT_LLM_BASE_URL``, ``ACCELOPT_LLM_MODEL``,
``ACCELOPT_LLM_API_KEY`` and ``ACCELOPT_LLM_TIMEOUT_S`` (``timeout_s``) override the default
endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from accelopt import settings
from accelopt.errors import UserError, read_user_text

AGENTS = ("planner", "executor", "fixer", "summarizer")
DEFAULT_CONFIG_FILE = "accelopt.yaml"


class AgentLLM(BaseModel):
    """What the file may say about one agent's endpoint; every field optional (inherited)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, gt=0)
    reasoning_effort: str | None = None
    price_in: float | None = Field(None, ge=0, description="$ per million input tokens")
    price_out: float | None = Field(None, ge=0, description="$ per million output tokens")
    concurrency: int | None = Field(None, gt=0)
    timeout_s: float | None = Field(None, gt=0)
    max_retries: int | None = Field(None, ge=0)
    retry_base_s: float | None = Field(None, ge=0)


class Endpoint(BaseModel):
    """One agent's endpoint, resolved: what the client uses."""

    model_config = ConfigDict(frozen=True)

    agent: str
    base_url: str
    model: str
    api_key: str = Field(repr=False)
    api_key_env: str | None
    temperature: float = 0.7
    max_tokens: int = 8192
    reasoning_effort: str | None = None
    price_in: float | None = None
    price_out: float | None = None
    concurrency: int = 8
    timeout_s: float = 600.0
    max_retries: int = 5
    retry_base_s: float = 1.0

    def params(self) -> dict[str, Any]:
        """The sampling parameters that shape a reply (part of the replay key)."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "reasoning_effort": self.reasoning_effort,
        }


class BudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_usd: float | None = Field(None, gt=0)
    max_tokens: int | None = Field(None, gt=0)


class LLMSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default: AgentLLM = AgentLLM()
    planner: AgentLLM | None = None
    executor: AgentLLM | None = None
    fixer: AgentLLM | None = None
    summarizer: AgentLLM | None = None


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    llm: LLMSection = LLMSection()
    budget: BudgetConfig = BudgetConfig()

    def endpoint(self, agent: str) -> Endpoint:
        """The resolved endpoint of an agent; UserError when no base URL or model is known."""
        if agent not in AGENTS:
            raise UserError(f"unknown agent {agent!r}; the agents are: {', '.join(AGENTS)}")
        overrides = settings.llm_overrides()
        own: AgentLLM = getattr(self.llm, agent) or AgentLLM()
        default = {**_set(self.llm.default), **overrides}
        timeout_s = settings.llm_timeout_s()
        if timeout_s is not None:
            default["timeout_s"] = timeout_s
        merged = {**default, **_set(own)}
        merged.pop("api_key", None)
        for field in ("base_url", "model"):
            if not merged.get(field):
                raise UserError(
                    f"no LLM {field} for the {agent}: set llm.default.{field} (or llm.{agent}."
                    f"{field}) in {DEFAULT_CONFIG_FILE}, or ACCELOPT_LLM_{field.upper()} (or "
                    "tune a kernel's declared parameters with no LLM: accelopt optimize PROBLEM "
                    "--strategy autotune --kernel expert)"
                )
        merged["api_key"] = _api_key(own.api_key_env, overrides.get("api_key"), default)
        merged.setdefault("api_key_env", None)
        return Endpoint(agent=agent, **merged)


def _set(section: AgentLLM | dict[str, Any]) -> dict[str, Any]:
    data = section if isinstance(section, dict) else section.model_dump()
    return {k: v for k, v in data.items() if v is not None}


def _read_key(env_name: str) -> str:
    value = settings.env(env_name)
    if value is None:
        raise UserError(f"the API key variable {env_name} named in the config is not set")
    return value


def _api_key(own_env: str | None, override: str | None, default: dict[str, Any]) -> str:
    """An agent's own key variable; else ACCELOPT_LLM_API_KEY; else the default's variable; else
    a placeholder (local servers such as vLLM or Ollama accept any key)."""
    if own_env:
        return _read_key(own_env)
    if override:
        return override
    if default.get("api_key_env"):
        return _read_key(default["api_key_env"])
    return "not-needed"


def _field_path(error: dict[str, Any]) -> str:
    return ".".join(str(part) for part in error.get("loc", ())) or "(top level)"


CONFIG_HINT = "give the path to a YAML file such as accelopt.example.yaml"


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and what a YAML error is, on one line."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    return " ".join(str(exc).split())


def load_config(path: Path | None = None) -> Config:
    """Read the config: ``path``, else ./accelopt.yaml when present, else built-in defaults."""
    if path is None:
        candidate = Path(DEFAULT_CONFIG_FILE)
        if not candidate.exists():
            return Config()
        path = candidate
    text = read_user_text(path, "config file", CONFIG_HINT)
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise UserError(
            f"config file {str(path)!r} is not valid YAML ({_yaml_problem(exc)}): correct it there"
        ) from None
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(
            f"invalid config {str(path)!r}: {_field_path(first)}: {first['msg']} "
            "(accelopt.example.yaml shows every field)"
        ) from None
