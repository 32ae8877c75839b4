"""The ``Kernel`` record and its identity (hash of the normalized source plus the backend)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_LINE_COMMENT = re.compile(r"//[^\n]*")
_SPACES = re.compile(r"[ \t]+")


def normalize_source(source: str) -> str:
    """Drop comments, trailing and repeated blanks, and empty lines: edits that change nothing."""
    text = _LINE_COMMENT.sub("", _BLOCK_COMMENT.sub("", source))
    lines = (_SPACES.sub(" ", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)


@dataclass(frozen=True)
class Kernel:
    """A kernel's source for one backend. ``name`` is a label for people (file name, kind)."""

    source: str
    backend: str = "cpu"
    name: str = "kernel"

    @property
    def hash(self) -> str:
        digest = hashlib.sha256(f"{self.backend}\n{normalize_source(self.source)}".encode())
        return digest.hexdigest()[:16]
