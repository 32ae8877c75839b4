"""Running the compiler, which reads hostile text, under limits: address space, CPU time, file
size, no core file, a deadline, and a bounded capture of what it prints; in a process group of
its own, so that a timeout kills cc1 and the linker too."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import threading
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import IO

COMPILER_MEMORY_BYTES = 2 << 30  # RLIMIT_AS of the compiler (cc1, as, ld each)
COMPILER_FILE_BYTES = 256 << 20  # RLIMIT_FSIZE: the largest file the compiler may write
MAX_OUTPUT_BYTES = 1 << 20  # what is kept of the compiler's messages; the rest is dropped


def effective_limit(which: int, wanted: int) -> int:
    """``wanted``, or less when this process's hard limit is lower (a child cannot raise it)."""
    _, hard = resource.getrlimit(which)
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


def _limit_child(cpu_s: int, memory_bytes: int, file_bytes: int) -> None:
    """Runs in the child between fork and exec (only setrlimit calls: no locks, nothing to
    deadlock on): the limits cc1, as and ld inherit."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    cpu_hard = effective_limit(resource.RLIMIT_CPU, cpu_s + 1)
    resource.setrlimit(resource.RLIMIT_CPU, (min(cpu_s, cpu_hard), cpu_hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class _Capture(threading.Thread):
    """Reads a pipe to its end, keeping the first ``limit`` bytes and counting the rest: a
    compiler that floods errors neither blocks on a full pipe nor fills memory."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        super().__init__(name="accelopt-compiler-output", daemon=True)
        self.fd, self.limit = stream.fileno(), limit
        self.chunks: list[bytes] = []
        self.kept = self.dropped = 0

    def run(self) -> None:
        while chunk := os.read(self.fd, 1 << 16):
            room = max(0, self.limit - self.kept)
            self.chunks.append(chunk[:room])
            self.kept += min(room, len(chunk))
            self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        text = b"".join(self.chunks).decode("utf-8", "replace")
        return f"{text}\n... ({self.dropped} more bytes of output)" if self.dropped else text


def _kill_group(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def run_compiler(
    cmd: list[str],
    timeout_s: float,
    *,
    cwd: Path | None = None,
    memory_bytes: int = COMPILER_MEMORY_BYTES,
    file_bytes: int = COMPILER_FILE_BYTES,
    max_output_bytes: int = MAX_OUTPUT_BYTES,
) -> tuple[int, str]:
    """Run the compiler; its exit code and what it printed (stdout and stderr, at most
    ``max_output_bytes``). In its own process group, so that a timeout (``TimeoutExpired``)
    kills cc1 and the linker too; each process under RLIMIT_AS ``memory_bytes``, RLIMIT_FSIZE
    ``file_bytes`` (SIGXFSZ at its default, even where the caller ignores it), RLIMIT_CPU just
    past the timeout, and no core file."""
    cpu_s = max(1, int(timeout_s) + 1)
    limits = partial(
        _limit_child,
        cpu_s,
        effective_limit(resource.RLIMIT_AS, memory_bytes),
        effective_limit(resource.RLIMIT_FSIZE, file_bytes),
    )
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=limits,  # restore_signals (the default) resets an ignored SIGXFSZ
    )
    assert proc.stdout is not None
    capture = _Capture(proc.stdout, max_output_bytes)
    capture.start()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
        raise
    finally:
        capture.join(timeout=5)
        if capture.is_alive():  # a child still holds the pipe open
            _kill_group(proc.pid)
            capture.join()
        proc.stdout.close()
    return proc.returncode, capture.text()
