"""An evaluation's default seeds: a per-machine pool (``seed_pool``).

A random salt kept in the cache, hashed with the problem and workload. Kernels are then all
checked on the same inputs on one machine, which is what makes the worker's references reusable
(``worker/references.py``, which keeps them in the same folder); the salt is never shown to an
agent, and deleting it draws new seeds.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

SALT_NAME = "salt"


def seed_pool(cache: Path, problem: str, workload: str, count: int) -> list[int]:
    """``count`` seeds for ``problem`` on ``workload``, the same every time on this machine."""
    salt_path = cache / SALT_NAME
    try:
        salt = salt_path.read_text().strip()
    except OSError:
        salt = ""
    if not salt:
        salt = secrets.token_hex(16)
        cache.mkdir(parents=True, exist_ok=True)
        tmp = salt_path.with_name(f"{SALT_NAME}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        tmp.write_text(salt)
        try:
            os.link(tmp, salt_path)  # atomic, and only if no salt exists: the first one wins
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        salt = salt_path.read_text().strip()
    seeds = []
    for i in range(count):
        digest = hashlib.sha256(f"{salt}\0{problem}\0{workload}\0{i}".encode()).digest()
        seeds.append(int.from_bytes(digest[:4], "little") & 0x7FFFFFFF)
    return seeds
