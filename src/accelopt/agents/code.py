"""Taking a complete kernel out of an LLM reply (executor and fixer share this boundary)."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_LANGS = {"c": {"c", "cpp", "c++", "h", ""}, "python": {"python", "py", ""}}
# C: a type, ``kernel``, its parameter list (one level of nested parentheses) and a ``{`` body;
# a call (``kernel(a, b);``) ends in ``;`` before any ``{``.
_C_DEFINITION = re.compile(r"\b[A-Za-z_]\w*[\s*]+kernel\s*\((?:[^;{}()]|\([^;{}()]*\))*\)[^;{}]*\{")
# Python (the triton backend): the module-level launcher the backend looks up by name, `kernel`.
_PY_DEFINITION = re.compile(r"^(?:async\s+)?def\s+kernel\s*\(|^kernel\s*=", re.MULTILINE)
_DEFINITIONS = {"c": _C_DEFINITION, "python": _PY_DEFINITION}
_MENTION = re.compile(r"\bkernel\s*\(")


@dataclass(frozen=True)
class Extracted:
    source: str | None
    reason: str = ""  # why there is no usable source


def defines_kernel(source: str, language: str = "c") -> bool:
    """Whether ``source`` defines the entry ``kernel`` (not merely calls it)."""
    return bool(_DEFINITIONS.get(language, _C_DEFINITION).search(source))


def _no_code_reason(text: str, blocks: list[str], finish_reason: str | None) -> str:
    if finish_reason == "length" or text.count("```") % 2 == 1:
        return "the reply was cut off before its code block ended"
    if any(_MENTION.search(b) for b in blocks):
        return "the reply's code blocks do not define the kernel function (they only call it)"
    if blocks:
        return "the reply's code blocks do not define the kernel function"
    return "the reply holds no code block"


def extract_code(text: str, language: str = "c", finish_reason: str | None = None) -> Extracted:
    """The last fenced block in ``language`` that defines ``kernel`` (a usage example that only
    calls it does not count); the reason when none does."""
    if not text.strip():
        return Extracted(None, "the reply is empty")
    langs = _LANGS.get(language, {language, ""})
    fenced = _FENCE.findall(text)  # a block inside a list item is indented as a whole
    blocks = [textwrap.dedent(body) for lang, body in fenced if lang.lower() in langs]
    defining = [b for b in blocks if defines_kernel(b, language)]
    if defining:
        return Extracted(defining[-1].strip() + "\n")
    return Extracted(None, _no_code_reason(text, blocks, finish_reason))
