"""The ``Kernel`` record and its identity (hash of the normalized source plus the backend)."""

from __future__ import annotations

import hashlib
import io
import re
import tokenize
from dataclasses import dataclass

import accelopt.backends.registry as registry

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_LINE_COMMENT = re.compile(r"//[^\n]*")
_SPACES = re.compile(r"[ \t]+")


def source_suffix(backend: str) -> str:
    """The file suffix of a backend's kernel sources (``.c``, ``.py``; ``.txt`` for a backend
    not installed here)."""
    found = registry.known(backend)
    return found.suffix if found is not None else ".txt"


def _drop_blank(text: str) -> str:
    """Drop empty lines, trailing blanks and repeated blanks after the indentation (kept: it is
    syntax in Python)."""
    lines = []
    for line in text.splitlines():
        body = line.lstrip(" \t")
        if body.strip():
            lines.append(line[: len(line) - len(body)] + _SPACES.sub(" ", body).rstrip())
    return "\n".join(lines)


def _normalize_c(source: str) -> str:
    text = _LINE_COMMENT.sub("", _BLOCK_COMMENT.sub("", source))
    return "\n".join(line.strip() for line in _drop_blank(text).splitlines())


def _normalize_python(source: str) -> str:
    """Drop comments and blank lines; indentation is kept, since it is syntax. A source that
    does not tokenize is kept as it is (it will not build either)."""
    try:
        tokens = [
            t
            for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type != tokenize.COMMENT
        ]
        text = tokenize.untokenize(tokens)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        text = source
    return _drop_blank(text)


def normalize_source(source: str, backend: str = registry.DEFAULT_BACKEND) -> str:
    """Drop comments, trailing and repeated blanks, and empty lines: edits that change nothing."""
    found = registry.known(backend)
    if found is not None and found.language is registry.Language.PYTHON:
        return _normalize_python(source)
    return _normalize_c(source)


@dataclass(frozen=True)
class Kernel:
    """A kernel's source for one backend. ``name`` is a label for people (file name, kind)."""

    source: str
    backend: str = registry.DEFAULT_BACKEND
    name: str = "kernel"

    @property
    def hash(self) -> str:
        normalized = normalize_source(self.source, self.backend)
        digest = hashlib.sha256(f"{self.backend}\n{normalized}".encode())
        return digest.hexdigest()[:16]
