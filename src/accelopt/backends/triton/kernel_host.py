"""The worker's side of a Triton kernel's process (``host.py``): start it, set it up while it is
trusted, contain it, check every thread of it, then send it commands and read its answers.

The process gets nothing of the worker's environment, only its log (stdout and stderr) and three
descriptors. Everything a verdict depends on stays here: the worker reads and writes the buffers
itself (shared memory on the CPU, CUDA IPC on a GPU), checks them and times each batch of calls
with its own clock; the process's answer is one short message per batch whose sequence must match.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelopt import settings
from accelopt.backends.base import MEMORY_FAULTS, KernelError, KernelLoadError
from accelopt.backends.containment import drop_mode, end_process, every_thread, log_tail
from accelopt.backends.status import Status
from accelopt.backends.triton import protocol

SETUP_TIMEOUT_S = 120.0  # importing torch and Triton, and a first launch, on a busy machine
SYSTEM_LIBRARIES = (
    "/usr/lib",
    "/usr/lib64",
    "/lib",
    "/lib64",
    "/usr/local/lib",
    "/etc/ld.so.cache",
    "/dev/null",
    "/dev/urandom",
    "/proc/cpuinfo",
    "/sys/devices/system/cpu",
)
GPU_READ = ("/proc/driver/nvidia", "/sys/bus/pci", "/sys/devices", "/usr/local/cuda", "/etc/nvidia")
CALIBRATION_ROUNDS = 32
STOP_WAIT_S = 2.0  # a stopped process shows it within this (it must be scheduled to stop)


class HostStartError(RuntimeError):
    """The kernel's process could not be started or set up (a harness fault, not the kernel's)."""


def python_paths() -> list[str]:
    """What the kernel's process may read: the Python installation, the site packages, and the
    folders of the packages it imports (an editable install of accelopt lives elsewhere)."""
    import accelopt

    names = ("stdlib", "platstdlib", "purelib", "platlib")
    paths = {sysconfig.get_paths()[n] for n in names}
    paths |= {p for p in sys.path if p.endswith((".zip", "lib-dynload"))}
    paths.add(str(Path(accelopt.__file__).parent))
    return sorted(p for p in paths if p and os.path.exists(p))


def gpu_devices() -> list[str]:
    dev = Path("/dev")
    return [*sorted(str(p) for p in dev.glob("nvidia*")), str(dev / "dri")]


def ptxas_path() -> list[str]:
    """Triton's own ptxas: the one program a kernel's process may start (it compiles there)."""
    import importlib.util

    spec = importlib.util.find_spec("triton")
    if spec is None or spec.origin is None:
        return []
    ptxas = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / "ptxas"
    return [str(ptxas)] if ptxas.exists() else []


class KernelHost:
    """One kernel's process: ``start``, ``alloc``..., ``contain``, ``load``, then batches."""

    def __init__(self, gpu: bool, log_env: dict[str, str] | None = None) -> None:
        self.gpu = gpu
        setup, theirs = socket.socketpair()
        cmd_r, self._cmd = os.pipe()
        self._done, done_w = os.pipe()
        fds = (theirs.fileno(), cmd_r, done_w)
        env = {"TRITON_INTERPRET": "1"} if not gpu else {}
        env |= {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        env["TORCHINDUCTOR_CACHE_DIR"] = "/"  # torch names one at import; nothing writes there
        env |= settings_for_gpu() if gpu else {}
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-u", "-m", "accelopt.backends.triton.host", *map(str, fds)],
            pass_fds=fds,
            stdin=subprocess.DEVNULL,
            env=env | (log_env or {}),
            cwd="/",
        )
        theirs.close()
        os.close(cmd_r)
        os.close(done_w)
        self._setup: socket.socket | None = setup
        self._sequence = 0
        self.overhead_s = 0.0
        self.facts: dict[str, str] = {}
        self.paused = False
        self.loaded = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- set-up (trusted: no kernel code in the process yet) ----------------------------------
    def ask(self, message: dict[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        if self._setup is None:
            raise RuntimeError("the kernel's process is set up already")
        self._setup.settimeout(SETUP_TIMEOUT_S)
        try:
            protocol.send(self._setup, message, list(fds))
            answer, _ = protocol.receive(self._setup)
        except (OSError, TimeoutError, ValueError):
            answer = None
        if answer is None:
            raise HostStartError(self._failure("while it was set up").args[0])
        if not answer.get("ok"):
            raise HostStartError(f"the Triton kernel's process: {answer.get('error')}")
        return answer

    def start(self, scratch: str | None) -> None:
        request: dict[str, Any] = {
            "op": "start",
            "gpu": self.gpu,
            "read": python_paths() + list(SYSTEM_LIBRARIES),
            "require_landlock": settings.sandbox_required(),
        }
        if self.gpu:
            request |= {
                "read": request["read"] + list(GPU_READ),
                "devices": gpu_devices(),
                "exec": ptxas_path(),
                "write": [scratch] if scratch else [],
                "cache_dir": scratch,
            }
        answer = self.ask(request)
        self.facts["landlock"] = str(answer["landlock"])

    def contain(self, source: str, memory_cap_bytes: int) -> dict[str, str]:
        """Every layer on, the set-up channel closed, every thread checked; the facts."""
        request = {
            "op": "contain",
            "source": source,
            "drop": drop_mode(),
            "memory_cap": memory_cap_bytes,
        }
        assert self._setup is not None
        protocol.send(self._setup, request)
        ready = select.select([self._done, self._setup], [], [], SETUP_TIMEOUT_S)[0]
        if self._done not in ready:  # a set-up failure (said on the socket), or silence
            answer, _ = protocol.receive(self._setup) if ready else (None, [])
            reason = answer.get("error") if answer else self._failure("while contained").args[0]
            raise HostStartError(f"the Triton kernel's process: {reason}")
        self._setup.close()
        self._setup = None
        contained = self._whole(os.read(self._done, 8 + protocol.MAX_TEXT))
        if contained is None or contained[1] != protocol.OK:
            raise HostStartError("the Triton kernel's process gave no facts once contained")
        facts = {k: str(v) for k, v in json.loads(contained[2]).items()}
        facts |= every_thread(self.pid, facts, drop_mode())  # REJECTED if one falls short
        self.facts = facts
        return facts

    def load(self) -> None:
        """The kernel's module imported in its process (its top level runs there)."""
        status, text = self._round_trip(protocol.OP_LOAD, [])[1:]
        if status != protocol.OK:
            raise KernelLoadError(text or "the kernel's module did not load")
        self.loaded = True

    # -- calls --------------------------------------------------------------------------------
    def call_batch(self, calls: Sequence[tuple[int, ...]]) -> float:
        """Seconds the batch took by this process's clock, less the round trip's own."""
        took, status, text = self._round_trip(protocol.OP_CALL, list(calls))
        if status == protocol.REFUSED:
            raise KernelError(text, Status.REJECTED)
        if status == protocol.FAULTED:
            raise KernelError(text, Status.CRASH, fault=True)
        if status != protocol.OK:
            raise KernelError(text or "the kernel failed", Status.CRASH)
        return max(took - self.overhead_s, took / 2)

    def _round_trip(self, op: int, calls: list[tuple[int, ...]]) -> tuple[float, int, str]:
        self.resume()
        self._sequence = (self._sequence + 1) & 0xFFFF
        start = time.perf_counter()
        try:
            os.write(self._cmd, protocol.command(op, self._sequence, calls))
        except OSError:
            raise self._failure("before a call") from None
        select.select([self._done], [], [])
        took = time.perf_counter() - start
        data = os.read(self._done, 8 + protocol.MAX_TEXT)
        if not data:
            raise self._failure("")
        answer = self._whole(data)
        if answer is None or answer[0] != self._sequence & 0xFF:
            self.kill()
            raise KernelError(
                "the kernel wrote to the harness's channel (a forged or broken answer); the "
                "process was killed",
                Status.REJECTED,
            )
        return took, answer[1], answer[2]

    def _whole(self, data: bytes) -> tuple[int, int, str] | None:
        """The answer, read to its stated length; None for more, less or a malformed one."""
        while len(data) >= 4 and len(data) < 4 + int.from_bytes(data[2:4], "little"):
            if not select.select([self._done], [], [], 5.0)[0]:
                return None
            chunk = os.read(self._done, 8 + protocol.MAX_TEXT)
            if not chunk:
                return None
            data += chunk
        if select.select([self._done], [], [], 0)[0]:
            return None  # a second answer: nobody asked for it
        return protocol.parse_answer(data)

    # -- between calls ------------------------------------------------------------------------
    def pause(self) -> None:
        """Stop the process (every thread, SIGSTOP) until its next call or ``resume``; stopped
        when this returns (a signal takes effect when its target next runs)."""
        if self.loaded and not self.paused and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGSTOP)
            self.paused = True
            deadline = time.monotonic() + STOP_WAIT_S
            while _state(self.pid) not in ("T", "t", "", "Z") and time.monotonic() < deadline:
                time.sleep(0.0005)

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)

    # -- the end ------------------------------------------------------------------------------
    def _failure(self, when: str) -> KernelError:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        return KernelError(*describe_exit(self.proc.returncode, when, log_tail(1500)))

    def kill(self) -> None:
        end_process(self.proc, (self._cmd, self._done))
        self._cmd = self._done = -1
        if self._setup is not None:
            self._setup.close()
            self._setup = None


def _state(pid: int) -> str:
    """The process's state letter in /proc ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def settings_for_gpu() -> dict[str, str]:
    """What CUDA must be told in an otherwise empty environment: which GPU is the worker's."""
    visible = settings.cuda_visible_devices()
    return {"CUDA_VISIBLE_DEVICES": visible} if visible is not None else {}


def describe_exit(code: int | None, when: str, log_tail: str) -> tuple[str, Status, bool]:
    """Why the kernel's process ended: (one sentence, status, whether a memory fault)."""
    suffix = f" {when}" if when else ""
    if code is None:
        return "the Triton kernel's process stopped answering" + suffix, Status.CRASH, False
    if code == -signal.SIGSYS:
        where = _kernel_line(log_tail)
        return (
            "the kernel made a system call the sandbox forbids"
            + (f" ({where})" if where else "")
            + ": a Triton kernel computes on its buffers and may not open files for writing, "
            "use the network, start processes or signal other processes",
            Status.REJECTED,
            False,
        )
    if code < 0:
        sig = signal.Signals(-code)
        fault = sig in MEMORY_FAULTS
        what = MEMORY_FAULTS.get(sig, signal.strsignal(sig))
        message = f"the Triton kernel's process died from {sig.name} ({what}){suffix}"
        return message, Status.CRASH, fault
    return f"the Triton kernel's process exited with status {code}{suffix}", Status.CRASH, False


def _kernel_line(log_tail: str) -> str:
    """The kernel's line in the traceback ``faulthandler`` wrote for the forbidden call."""
    lines = [x.strip() for x in log_tail.splitlines() if "/accelopt-kernel/kernel.py" in x]
    if not lines:
        return ""
    line = lines[0].split("line", 1)[-1].split(" in ", 1)[0].strip()
    return f"at kernel.py line {line}"
