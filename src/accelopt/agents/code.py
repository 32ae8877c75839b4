"""Taking a complete kernel out of an LLM reply (executor and fixer share this boundary)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_LANGS = {"c": {"c", "cpp", "c++", "h", ""}, "python": {"python", "py", ""}}


@dataclass(frozen=True)
class Extracted:
    source: str | None
    reason: str = ""  # why there is no usable source


def extract_code(text: str, language: str = "c", finish_reason: str | None = None) -> Extracted:
    """The last fenced block in ``language`` that defines ``kernel``; the reason when none does."""
    if not text.strip():
        return Extracted(None, "the reply is empty")
    langs = _LANGS.get(language, {language, ""})
    blocks = [body for lang, body in _FENCE.findall(text) if lang.lower() in langs]
    with_kernel = [b for b in blocks if re.search(r"\bkernel\s*\(", b)]
    if with_kernel:
        return Extracted(with_kernel[-1].strip() + "\n")
    if finish_reason == "length" or text.count("```") % 2 == 1:
        return Extracted(None, "the reply was cut off before its code block ended")
    if blocks:
        return Extracted(None, "the reply's code blocks do not define the kernel function")
    return Extracted(None, "the reply holds no code block")
