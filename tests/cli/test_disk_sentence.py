"""A full or read-only disk met outside the store (a kernel written out, say) is one sentence
(``cli.errors.disk_sentence``, which ``main`` prints with exit status 2)."""

from __future__ import annotations

import errno

from accelopt.cli.errors import disk_sentence


def test_a_full_or_read_only_disk_outside_the_store_is_one_sentence() -> None:
    full = disk_sentence(OSError(errno.ENOSPC, "No space left on device", "/x/best.c"))
    assert full is not None and "/x/best.c" in full and "free space there" in full
    assert "--resume" in full and "\n" not in full
    assert "Read-only file system" in str(
        disk_sentence(OSError(errno.EROFS, "Read-only file system", "/x"))
    )
    assert disk_sentence(OSError(errno.ENOENT, "No such file or directory", "/x")) is None
