"""Secrets kept out of records: which values are secret, and their redaction from a text."""

from __future__ import annotations

import time

import pytest

from accelopt.llm.config import Config
from accelopt.redaction import REDACTED, redact, secrets_to_redact


def config(**agents: dict[str, str]) -> Config:
    return Config.model_validate({"llm": agents})


# -- which values are secret -------------------------------------------------------------------


def test_the_keys_the_config_names_are_secret_whatever_their_variable_is_called() -> None:
    cfg = config(default={"api_key_env": "VLLM_CRED"}, planner={"api_key_env": "PLANNER_AUTH"})
    environ = {"VLLM_CRED": "vllm-0123456789", "PLANNER_AUTH": "pl-0123456789", "HOME": "/root/x"}
    assert set(secrets_to_redact(environ, cfg)) == {"vllm-0123456789", "pl-0123456789"}
    assert secrets_to_redact(environ) == ()  # without the config, those names say nothing


def test_variables_whose_names_look_secret() -> None:
    environ = {
        "OPENAI_API_KEY": "sk-proj-abcdefgh",
        "ACCELOPT_LLM_API_KEY": "override-key-1234",
        "GITHUB_TOKEN": "ghp_0123456789",
        "aws_secret_access_key": "lowercase-names-too",
        "DB_PASSWORD": "correct horse",
        "PATH": "/usr/local/bin:/usr/bin",
        "TOKENIZERS_PARALLELISM": "false",  # too short to be a secret
        "EMPTY_KEY": "",
    }
    assert set(secrets_to_redact(environ, None)) == {
        "sk-proj-abcdefgh", "override-key-1234", "ghp_0123456789", "lowercase-names-too",
        "correct horse",
    }  # fmt: skip


def test_secrets_come_longest_first_each_once() -> None:
    environ = {"A_KEY": "12345678", "B_TOKEN": "1234567890ab", "C_SECRET": "12345678"}
    assert secrets_to_redact(environ) == ("1234567890ab", "12345678")


def test_a_short_configured_key_is_not_redacted() -> None:
    cfg = config(default={"api_key_env": "LOCAL"})
    assert secrets_to_redact({"LOCAL": "EMPTY"}, cfg) == ()


def test_a_named_variable_that_is_not_set_is_skipped() -> None:
    assert secrets_to_redact({}, config(default={"api_key_env": "UNSET_VAR"})) == ()


# -- redaction ---------------------------------------------------------------------------------


def test_every_occurrence_is_redacted() -> None:
    text = "key=sk-abcdefgh12\nretry with sk-abcdefgh12 and sk-abcdefgh12."
    assert redact(text, ["sk-abcdefgh12"]) == (
        f"key={REDACTED}\nretry with {REDACTED} and {REDACTED}."
    )


def test_a_text_without_secrets_is_unchanged() -> None:
    assert redact("nothing to see", ["sk-abcdefgh12"]) == "nothing to see"
    assert redact("nothing to see", []) == "nothing to see"
    assert redact("", ["sk-abcdefgh12"]) == ""


def test_empty_secrets_are_ignored() -> None:
    assert redact("abc", ["", "zzzzzzzz"]) == "abc"


def test_a_secret_inside_another_leaves_no_tail() -> None:
    secrets = ["supersecret", "supersecretvalue"]
    assert redact("a supersecretvalue b supersecret", secrets) == f"a {REDACTED} b {REDACTED}"
    assert redact("a supersecretvalue", secrets[::-1]) == f"a {REDACTED}"


def test_overlapping_secrets_leave_no_fragment() -> None:
    assert redact("xxabcdefgh1234567yy", ["abcdefgh12", "gh1234567"]) == f"xx{REDACTED}yy"
    assert redact("xxabcdefgh1234567yy", ["gh1234567", "abcdefgh12"]) == f"xx{REDACTED}yy"


def test_a_secret_overlapping_itself() -> None:
    assert redact("<abababab ab>", ["ababab"]) == f"<{REDACTED} ab>"


def test_adjacent_occurrences_stay_two() -> None:
    assert redact("keykey12keykey12", ["keykey12"]) == REDACTED * 2


@pytest.mark.timeout(60)
def test_megabytes_of_text_in_linear_time() -> None:
    secrets = [f"sk-{i:04d}-abcdefghij" for i in range(20)]
    line = "step 12: loss 0.123 using sk-0007-abcdefghij for the request\n"
    text = line * 100_000  # 6 MB, 100 000 occurrences
    start = time.perf_counter()
    out = redact(text, secrets)
    assert time.perf_counter() - start < 5.0
    assert out == line.replace("sk-0007-abcdefghij", REDACTED) * 100_000
