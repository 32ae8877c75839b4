"""The worker's side of ``kernel_host.c``: a separate, sandboxed process per evaluation that runs a
C kernel, and nothing else.

The worker keeps everything a verdict depends on: it writes inputs and reads outputs and guard
regions with ``process_vm_readv``/``process_vm_writev`` at addresses the kernel host gave before any
kernel code existed, and it times each batch of calls with its own clock. What the kernel host says
after the kernel is loaded is one byte per batch ("done"); a second byte, or none, is a broken
protocol and ends the evaluation. Buffers stay private memory of the kernel host (anonymous, on huge
pages like NumPy's), so the kernel streams the same kind of memory the ceilings were measured on.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from accelopt import settings
from accelopt.backends.base import MEMORY_FAULTS, KernelError, KernelLoadError
from accelopt.backends.containment import drop_mode, end_process, every_thread, log_tail
from accelopt.backends.cpu.hashed_files import publish, recorded_hash, sha256_of
from accelopt.backends.cpu.openmp import openmp_environment
from accelopt.backends.cpu.process_memory import transfer
from accelopt.backends.status import Status
from accelopt.hardware.toolchain import Compiler

SOURCE = Path(__file__).with_name("kernel_host.c")
FLAGS = ("-O2", "-std=gnu11", "-fopenmp", "-Wall")
LIBS = ("-ldl", "-lm")
OP_CALL, OP_NOOP, OP_EXIT = 1, 2, 3
MAX_CALLS = 256  # per batch (kernel_host.c)
MAX_ARGS = 32
EXIT_FORBIDDEN = 97
EXIT_PROTOCOL = 98
CALIBRATION_ROUNDS = 64
SETUP_TIMEOUT_S = 30.0
PROBE_THREADS = 2
# What the kernel host's environment keeps of the worker's: the OpenMP settings libgomp reads
# (openmp.py) and the locale, nothing else.
_LOCALE_PREFIXES = ("LANG", "LC_")


class KernelHostStartError(RuntimeError):
    """The kernel host could not be built or started (a harness fault, not the kernel's)."""


@dataclass(frozen=True)
class RemoteBuffer:
    """A float32 buffer in the kernel host's memory, between guard regions of the given sizes."""

    address: int
    shape: tuple[int, ...]
    before_bytes: int
    after_bytes: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * 4

    @property
    def size(self) -> int:
        return self.nbytes // 4


def host_env(worker_env: Mapping[str, str]) -> dict[str, str]:
    locale = {k: v for k, v in worker_env.items() if k.startswith(_LOCALE_PREFIXES)}
    return locale | openmp_environment(worker_env)


@cache
def host_binary(cc: Compiler) -> Path:
    """The kernel host built by ``cc`` (once per source and compiler, in the cache; read-only, with
    its SHA-256 beside it, checked before the first use in a process: a binary that differs from
    the one built is built again, never run)."""
    source = SOURCE.read_bytes()
    key = hashlib.sha256(
        b"\0".join(
            [
                source,
                *(p.encode() for p in cc.command),
                cc.version.encode(),
                " ".join(FLAGS).encode(),
            ]
        )
    )
    target = settings.cache_dir() / "kernel-host" / f"accelopt-kernel-host-{key.hexdigest()[:16]}"
    with contextlib.suppress(OSError):  # not built yet: build it
        if sha256_of(target) == recorded_hash(target):
            return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    cmd = [*cc.command, *FLAGS, "-o", str(tmp), str(SOURCE), *LIBS]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise KernelHostStartError(
            f"the kernel kernel host does not build: {out.stderr.strip()[-400:]}"
        )
    publish(tmp, target, mode=0o555)
    return target


def _facts(words: str) -> dict[str, str]:
    return dict(item.partition("=")[::2] for item in words.split())


class KernelHost:
    """One kernel host process: set up (buffers, calibration), load, then batches of calls."""

    def __init__(self, cc: Compiler, worker_env: Mapping[str, str]) -> None:
        binary = host_binary(cc)
        setup, theirs = socket.socketpair()
        cmd_r, self._cmd = os.pipe()
        self._done, done_w = os.pipe()
        child_fds = (theirs.fileno(), cmd_r, done_w)
        self.proc = subprocess.Popen(
            [str(binary), *map(str, child_fds)],
            pass_fds=child_fds,
            stdin=subprocess.DEVNULL,
            env=host_env(worker_env),
        )
        theirs.close()
        os.close(cmd_r)
        os.close(done_w)
        self._setup: socket.socket | None = setup
        # Buffered reads: the kernel host writes nothing but the answer to each question.
        self._setup_file = setup.makefile("rb")
        self.overhead_s = 0.0
        self._sequence = 0
        self._pending: list[tuple[int, np.ndarray]] = []  # small writes not made yet (``poke``)
        self.loaded = False
        self.paused = False
        self.facts: dict[str, str] = {}

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- set-up (trusted: no kernel code exists in the process yet) --------------------------
    def _ask(self, line: str) -> str:
        if self._setup is None:
            raise RuntimeError("the kernel host's set-up is over (the kernel is loaded)")
        self._setup.settimeout(SETUP_TIMEOUT_S)
        try:
            self._setup.sendall(line.encode() + b"\n")
            answer = self._setup_file.readline(4096).decode(errors="replace").strip()
        except (OSError, TimeoutError):
            answer = ""
        if not answer:
            raise self._failure("while it was set up")
        return answer

    def alloc(self, nbytes: int, guard: int, fence: int, offset: int = 0) -> tuple[int, int, int]:
        """A zeroed buffer ``offset`` bytes into its page: (its address, guard bytes before,
        guard bytes after)."""
        answer = self._ask(f"alloc {nbytes} {guard} {fence} {offset}").split()
        if answer[0] != "ok":
            raise MemoryError(" ".join(answer[1:]) or "the kernel host could not map a buffer")
        return int(answer[1]), int(answer[2]), int(answer[3])

    def calibrate(self) -> float:
        """The fastest of CALIBRATION_ROUNDS empty batches (pipe round trip, wake-ups), measured
        before the kernel is loaded, so the kernel cannot inflate what is subtracted from its
        time. The fastest, not the median: what is subtracted never exceeds the overhead of a
        batch, so a time is never made shorter than the calls took."""
        assert self._setup is not None
        self._setup.sendall(f"calibrate {CALIBRATION_ROUNDS}\n".encode())
        rounds = [self._round_trip(OP_NOOP, [[0]]) for _ in range(CALIBRATION_ROUNDS)]
        if self._setup_file.readline(64).strip() != b"ok":
            raise self._failure("while it was calibrated")
        self.overhead_s = min(rounds)
        return self.overhead_s

    def probe(self) -> dict[str, str]:
        """What the sandbox can apply here (the process applies it as for a kernel and answers),
        and whether this process still reaches its memory afterwards (``memory_access``: 1, or
        why not: e.g. Yama's ptrace_scope 2 or 3)."""
        address, _, _ = self.alloc(64, 0, 0)
        answer = self._ask(f"probe {PROBE_THREADS} {drop_mode()}")
        facts = _facts(answer.partition(" ")[2])
        try:
            facts |= every_thread(self.pid, facts, drop_mode())
        except KernelError as exc:
            facts["every_thread"] = str(exc)
        pattern = np.arange(16, dtype=np.float32)
        try:
            self.write(address, pattern)
            same = np.array_equal(self.read(address, 64).view(np.float32), pattern)
            access = "1" if same else "the memory read back differs"
        except KernelError as exc:
            access = str(exc).split(":")[0].removeprefix("the harness could not reach ")
        self.kill()
        return {**facts, "memory_access": access}

    def load(
        self, artifact: Path, threads: int, memory_cap_bytes: int, require_filter: bool = True
    ) -> dict[str, str]:
        """Load the kernel; from here the process is untrusted and its set-up channel closed.
        ``require_filter``: refuse to run the kernel where the system call filter cannot be
        installed (else run it and say so in the facts)."""
        require = int(require_filter)
        answer = self._ask(f"load {threads} {memory_cap_bytes} {require} {drop_mode()} {artifact}")
        word, _, rest = answer.partition(" ")
        if word != "loaded":
            raise KernelLoadError(rest or answer)
        facts = _facts(rest)
        try:
            facts |= every_thread(self.pid, facts, drop_mode())
        except KernelError:
            if require_filter:
                self.kill()
                raise
        self.facts = facts
        self.loaded = True
        self._setup_file.close()
        assert self._setup is not None
        self._setup.close()
        self._setup = None
        return self.facts

    # -- calls -------------------------------------------------------------------------------
    def call_batch(self, calls: Sequence[Sequence[int]]) -> float:
        """Seconds the batch took by the worker's clock, less the calibrated overhead (at most
        half of it: a batch whose calls take less than the round trip is not timed to zero).
        The small writes ``poke`` kept are made first, outside the timed window."""
        self._flush()
        took = self._round_trip(OP_CALL, calls)
        return max(took - self.overhead_s, took / 2)

    # -- between calls: stopped -------------------------------------------------------------
    def pause(self) -> None:
        """Stop the kernel's process (SIGSTOP: every thread of it, which it can neither catch
        nor ignore) until its next call or ``resume``: nothing of it runs while the worker times
        another kernel or a control, or waits for the device. Its memory stays readable."""
        if self.loaded and not self.paused and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)

    def _round_trip(self, op: int, calls: Sequence[Sequence[int]]) -> float:
        self.resume()
        nargs = len(calls[0])
        if not 0 < len(calls) <= MAX_CALLS or not 0 < nargs <= MAX_ARGS:
            raise ValueError(f"a batch holds 1 to {MAX_CALLS} calls of 1 to {MAX_ARGS} arguments")
        self._sequence = (self._sequence + 1) & 0xFF
        payload = struct.pack(
            f"<4I{len(calls) * nargs}Q",
            op,
            len(calls),
            nargs,
            self._sequence,
            *(a for call in calls for a in call),
        )
        start = time.perf_counter()
        try:
            os.write(self._cmd, payload)
        except OSError:
            raise self._failure("before a call") from None
        select.select([self._done], [], [])
        took = time.perf_counter() - start
        answer = os.read(self._done, 2)
        if not answer:
            raise self._failure("")
        if answer != bytes([self._sequence]) or select.select([self._done], [], [], 0)[0]:
            self.kill()
            raise KernelError(
                "the kernel wrote to the harness's channel (a forged answer); the process was "
                "killed",
                Status.REJECTED,
            )
        return took

    # -- memory ------------------------------------------------------------------------------
    def poke(self, items: Sequence[tuple[int, np.ndarray]]) -> None:
        """Small writes, made together with the others kept before the next call or any other
        access to the kernel's memory (one system call for a batch's canaries and changed
        inputs, where one each cost more than a small kernel's call)."""
        self._pending.extend((address, np.ascontiguousarray(a)) for address, a in items)

    def _flush(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, []
            self.write_scattered(pending)

    def write(self, address: int, data: np.ndarray) -> None:
        self._flush()
        data = np.ascontiguousarray(data)
        transfer(self.pid, [(data.ctypes.data, address, data.nbytes)], write=True)

    def read(self, address: int, nbytes: int) -> np.ndarray:
        return self.read_into(address, np.empty(nbytes, dtype=np.uint8))

    def read_into(self, address: int, out: np.ndarray) -> np.ndarray:
        """Fill ``out`` (C-contiguous, writable) with the bytes at ``address``; returns it."""
        if not (out.flags.c_contiguous and out.flags.writeable):
            raise ValueError("read_into needs a C-contiguous, writable array")
        self._flush()
        transfer(self.pid, [(out.ctypes.data, address, out.nbytes)], write=False)
        return out

    def write_repeated(self, address: int, block: np.ndarray, nbytes: int) -> None:
        """Write ``nbytes`` at ``address`` as copies of ``block`` (C-contiguous; its size divides
        ``nbytes`` or the last copy is cut short): a fill without a host array of its size."""
        self._flush()
        step = block.nbytes
        pairs = [
            (block.ctypes.data, address + at, min(step, nbytes - at))
            for at in range(0, nbytes, step)
        ]
        transfer(self.pid, pairs, write=True)

    def read_scattered(self, items: Sequence[tuple[int, int]]) -> list[np.ndarray]:
        """Read ``(remote address, bytes)`` pieces, in few system calls."""
        self._flush()
        outs = [np.empty(n, dtype=np.uint8) for _, n in items]
        pairs = [(o.ctypes.data, at, n) for (at, n), o in zip(items, outs, strict=True)]
        transfer(self.pid, pairs, write=False)
        return outs

    def write_scattered(self, items: Sequence[tuple[int, np.ndarray]]) -> None:
        """Write each small array at its remote address, in few system calls."""
        self._flush()  # earlier pokes first: writes land in the order they were asked for
        keep = [np.ascontiguousarray(a) for _, a in items]
        addresses = [address for address, _ in items]
        pairs = [(a.ctypes.data, at, a.nbytes) for at, a in zip(addresses, keep, strict=True)]
        transfer(self.pid, pairs, write=True)

    # -- the end -----------------------------------------------------------------------------
    def _failure(self, when: str) -> KernelError:
        """What the kernel host's end means, as the kernel's error (a forbidden system call is
        REJECTED; a memory fault is a CRASH with ``fault``)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        code = self.proc.returncode  # None: it has not ended
        message = describe_host_exit(code, when, log_tail())
        if code == EXIT_FORBIDDEN:
            return KernelError(message, Status.REJECTED)
        fault = code is not None and -code in MEMORY_FAULTS
        return KernelError(message, Status.CRASH, fault=fault)

    def kill(self) -> None:
        end_process(self.proc, (self._cmd, self._done))
        self._cmd = self._done = -1
        if self._setup is not None:
            self._setup_file.close()
            self._setup.close()
            self._setup = None


def describe_host_exit(code: int | None, when: str, log_tail: str = "") -> str:
    """Why the kernel's process ended, in one sentence."""
    if code is None:
        return "the kernel's process stopped answering" + (f" {when}" if when else "")
    if code == EXIT_FORBIDDEN:
        name = log_tail.rsplit("forbidden system call ", 1)[-1].strip() if log_tail else ""
        what = f" ({name})" if "forbidden system call" in log_tail else ""
        return (
            f"the kernel made a system call the sandbox forbids{what}: a kernel computes on its "
            "buffers and may not open files, use the network, start processes or send signals"
        )
    if code == EXIT_PROTOCOL:
        return "the kernel broke the harness's protocol; its process was killed"
    if code < 0:
        sig = signal.Signals(-code)
        if sig in MEMORY_FAULTS:
            return f"the kernel was killed by {sig.name} ({MEMORY_FAULTS[sig]})"
        return f"the kernel's process died from {sig.name} ({signal.strsignal(sig)})" + (
            f" {when}" if when else ""
        )
    return f"the kernel's process exited with status {code}" + (f" {when}" if when else "")
