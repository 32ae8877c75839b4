"""Free text to a safe FTS5 query: word tokens, each quoted as a phrase, joined with OR.

Quoting makes every token a literal (FTS5 operators such as ``AND``, ``NEAR``, ``*``, ``-``,
``:`` and column filters lose their meaning), so no user text can make the query fail to parse.
"""

from __future__ import annotations

import re

MAX_TOKENS = 64  # a long query (a whole kernel pasted in) stays a bounded OR

# Letters and digits, as FTS5's unicode61 tokenizer splits them (``_`` separates, as there).
_TOKEN = re.compile(r"[^\W_]+")


def query_tokens(text: str) -> list[str]:
    """The distinct word tokens of ``text`` (case-insensitively), in order, at most MAX_TOKENS."""
    seen: set[str] = set()
    tokens: list[str] = []
    for token in _TOKEN.findall(text):
        folded = token.casefold()
        if folded in seen:
            continue
        seen.add(folded)
        tokens.append(token)
        if len(tokens) == MAX_TOKENS:
            break
    return tokens


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression for ``text``, or None when it holds no word token."""
    tokens = query_tokens(text)
    if not tokens:
        return None
    # The token regex admits no '"', but double any anyway: that is FTS5's escape.
    return " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)
