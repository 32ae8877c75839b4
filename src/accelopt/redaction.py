"""Keeping secrets out of what accelopt records: a kernel's log, an error, a report.

``secrets_to_redact`` gathers the values to hide: the LLM API keys the config names (the
variables of ``api_key_env`` and ``ACCELOPT_LLM_API_KEY``) and every environment variable whose
name says it holds a secret (KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL). ``redact`` replaces
each occurrence of any of them by ``[redacted]``. Both are pure: the caller passes the environment
(``settings.environment()``) and the config.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping

from accelopt.llm.config import AGENTS, Config

REDACTED = "[redacted]"
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
# Shorter values are no secret worth hiding, and hiding them would blot out ordinary words
# ("false", "1", "EMPTY": what a local server's key variable often holds).
MIN_SECRET_CHARS = 8
OVERRIDE_KEY_VARIABLE = "ACCELOPT_LLM_API_KEY"


def key_variables(config: Config | None) -> set[str]:
    """The names of the variables that hold the config's API keys."""
    names = {OVERRIDE_KEY_VARIABLE}
    if config is not None:
        sections = [config.llm.default, *(getattr(config.llm, agent) for agent in AGENTS)]
        names.update(s.api_key_env for s in sections if s is not None and s.api_key_env)
    return names


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret."""
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def secrets_to_redact(environ: Mapping[str, str], config: Config | None = None) -> tuple[str, ...]:
    """The values to hide, longest first, each once: the API keys ``config`` names (read from
    ``environ``) and the values of the variables of ``environ`` whose names look secret; values
    shorter than MIN_SECRET_CHARS are left out."""
    names = key_variables(config) | {name for name in environ if looks_secret(name)}
    values = {environ.get(name, "") for name in names}
    return tuple(sorted((v for v in values if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True))


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of every secret replaced by ``[redacted]``. Overlapping
    occurrences (of one secret or of several, e.g. one inside another) become one ``[redacted]``
    covering them all, so no fragment of either survives. Empty secrets are ignored. Linear in
    the text per secret (``str.find``), plus the work per occurrence."""
    spans = _merged(heapq.merge(*(_occurrences(text, s) for s in set(secrets) if s)))
    parts, last = [], 0
    for start, end in spans:
        parts += [text[last:start], REDACTED]
        last = end
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def _occurrences(text: str, secret: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each occurrence of ``secret`` in ``text``, overlapping ones included."""
    start = text.find(secret)
    while start != -1:
        yield start, start + len(secret)
        start = text.find(secret, start + 1)


def _merged(spans: Iterable[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Spans sorted by start, overlapping ones merged (touching ones stay apart)."""
    current: tuple[int, int] | None = None
    for start, end in spans:
        if current is not None and start < current[1]:
            current = (current[0], max(current[1], end))
            continue
        if current is not None:
            yield current
        current = (start, end)
    if current is not None:
        yield current
