"""Files kept in the cache read-only with their SHA-256 recorded beside them (built kernel objects,
the kernel host): a file is used again only while it still has the hash recorded when it was built.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def sha256_of(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def hash_path(target: Path) -> Path:
    """Where the hash of ``target`` is recorded."""
    return target.with_suffix(".sha256")


def recorded_hash(target: Path) -> str | None:
    """The hash recorded for ``target``, or None when none is."""
    try:
        with hash_path(target).open("rb") as file:
            return file.read(128).decode("ascii", "replace").strip()
    except OSError:
        return None


def publish(built: Path, target: Path, mode: int = 0o444) -> None:
    """Put ``built`` at ``target`` with the read-only ``mode``, its hash first (read-only, replaced
    atomically): whoever sees the file sees its hash."""
    digest = sha256_of(built)
    built.chmod(mode)
    hash_tmp = built.with_suffix(".sha256")
    try:
        hash_tmp.write_text(digest + "\n")
        hash_tmp.chmod(0o444)
        os.replace(hash_tmp, hash_path(target))
        os.replace(built, target)
    finally:
        hash_tmp.unlink(missing_ok=True)
