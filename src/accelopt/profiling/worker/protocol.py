"""What crosses the process boundary between the parent and a worker, and how.

One JSON object per line over a socket (``Channel``). JSON, not pickle: once a kernel is loaded
the worker is untrusted, and the parent must not run anything a worker sends. A line over
MAX_MESSAGE_BYTES, one that does not parse, or one that is not the message the parent expects
(``parse_answer``) is a protocol error, which the parent treats like a crash.

The messages are typed here, once, for both sides:

- parent → worker: an ``EvaluateRequest`` (one kernel) or a ``RetimeRequest`` (a re-timing
  session of several kernels, ``session.py``), then ``Shutdown``;
- worker → parent: ``Hello`` once at start-up; a ``Phase`` before each step that runs kernel code
  (the parent applies that phase's deadline); then the answer to the request: an
  ``EvaluationAnswer`` (one ``KernelResult``) or a ``SessionAnswer`` (one per kernel).

A ``KernelResult`` is what the harness found, before scoring: the parent turns it into an
``Evaluation`` (it holds the hardware spec and decides PASSED or SUSPICIOUS, ``parent/scoring.py``).
"""

from __future__ import annotations

import json
import select
import socket
import time
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from accelopt.backends.status import Status
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.measurement import KernelMeasurement

MAX_MESSAGE_BYTES = 32 << 20
SEPARATE = "separate"  # KernelResult.kernel_process: the kernel ran in a process of its own
# The loops a ``ControlSpec`` names: built and run by the worker (``worker/control.py``), their
# version recorded by the parent with each figure (``parent/controls.py``)
CONTROL_SOURCE = Path(__file__).resolve().parents[2] / "hardware" / "microbench" / "control.c"


class ProtocolError(Exception):
    """A message that cannot be read: the worker is treated as crashed."""


class MalformedAnswerError(ProtocolError):
    """A readable message that is not an answer to the request: the worker is not believed."""


class _Message(BaseModel):
    # inf and NaN cross as JSON's Infinity/NaN (a kernel's error may be infinite), not as null
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


# -- parent → worker ----------------------------------------------------------------------------


class KernelSource(_Message):
    source: str
    name: str  # the kernel's label (file name or kind)


class ControlSpec(_Message):
    """The loop timed between slices of a kernel's timing (``worker/control.py``): ``fma``,
    ``vector``, or ``memory`` streaming ``reads`` arrays into ``writes`` arrays."""

    kind: Literal["fma", "vector", "memory"]
    reads: int = 0
    writes: int = 0

    def describe(self) -> str:
        if self.kind == "memory":
            return f"memory stream control ({self.reads} read : {self.writes} written arrays)"
        if self.kind == "fma":
            return "FMA control (independent fused multiply-add chains)"
        return "vector control (independent multiply-then-add chains)"


class _Request(_Message):
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")

    backend: str
    problem: dict[str, Any]  # problems.shipping.ProblemRef: the problem's name, or its files
    workload: str
    config: EvalConfig
    seeds: list[int]
    threads: int  # OpenMP threads the kernel runs with
    llc_bytes: int | None  # the last-level cache the rotation sets must outgrow
    lock_path: str  # the device lock (hardware/devicelock.py)
    control: ControlSpec | None = None  # the control timed with the kernel (none: not calibrated)
    race_s: float | None = None  # stop timing once clearly slower than this latency (a search)
    drift: float = 0.0  # the machine's drift between evaluations (``hardware/drift.py``)


class EvaluateRequest(_Request):
    type: Literal["evaluate"] = "evaluate"
    kernel: KernelSource


class RetimeRequest(_Request):
    type: Literal["retime"] = "retime"
    kernels: list[KernelSource]
    min_rounds: int

    def one(self, kernel: KernelSource) -> EvaluateRequest:
        """The evaluation of one of the session's kernels (built, loaded and checked alone)."""
        fields = self.model_dump(exclude={"type", "kernels", "min_rounds"})
        return EvaluateRequest(**{**fields, "config": self.config}, kernel=kernel)


class Shutdown(_Message):
    type: Literal["shutdown"] = "shutdown"


Request = Annotated[EvaluateRequest | RetimeRequest | Shutdown, Field(discriminator="type")]
_REQUEST: TypeAdapter[EvaluateRequest | RetimeRequest | Shutdown] = TypeAdapter(Request)


def parse_request(message: dict[str, Any]) -> EvaluateRequest | RetimeRequest | Shutdown:
    """The worker's reading of what the parent sent (the parent is trusted: a bad one raises)."""
    return _REQUEST.validate_python(message)


# -- worker → parent ----------------------------------------------------------------------------


class Hello(_Message):
    type: Literal["hello"] = "hello"
    pid: int
    network_isolated: bool
    scratch: str  # the worker's scratch directory, where its log is


class Phase(_Message):
    type: Literal["phase"] = "phase"
    phase: str  # start | lock | compile | load | reference | call | wait | check | prepare | verify
    detail: str = ""


class KernelResult(_Message, KernelMeasurement):
    """What the harness found for one kernel: its measurement (``KernelMeasurement``) and what
    the parent scores it with; ``status`` None: it passed every step (the parent scores it). A
    failure of the service itself (a worker that died, a lost actor) is one too, with its status
    and error."""

    status: Status | None = None
    error: str = ""
    kernel_ran: bool = False  # some kernel code ran (in this worker, unless kernel_process says)
    kernel_process: str = ""  # SEPARATE: it ran in a process of its own (the cpu backend)
    # The median's 95 % interval within this timing alone (the parent widens it by the drift)
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    # The control's figure before, between and after the slices of the timing (None: disturbed
    # by the kernel's process, left out), each slice's median latency, and why a control failed
    control_rates: list[float | None] = []
    slice_medians: list[float | None] = []
    control_note: str = ""

    @property
    def taints(self) -> bool:
        """Whether kernel code failed inside the worker (which is then replaced: the kernel may
        have scribbled over its memory)."""
        return self.kernel_ran and self.status is not None and self.kernel_process != SEPARATE


class _Answer(_Message):
    """An answer to a request (which one is known from the request: ``parse_answer``)."""

    type: Literal["result"] = "result"


class EvaluationAnswer(_Answer):
    """The answer to an ``EvaluateRequest``."""

    result: KernelResult


class SessionAnswer(_Answer):
    """A re-timing session's answer: each kernel's result and its round medians, in order."""

    results: list[KernelResult]
    rounds: int
    round_s: list[list[float | None]]  # each kernel's round medians (session.RoundSeries)
    clean_rounds: int | None = None  # rounds that gave figures (the others were disturbed)
    disturbed: bool = False  # too few did: round_s holds the slices' floors instead
    worker_pid: int | None = None  # None: no worker answered (the session failed as a whole)


Answer = EvaluationAnswer | SessionAnswer


def parse_answer(request: EvaluateRequest | RetimeRequest, message: dict[str, Any]) -> Answer:
    """The answer to ``request`` in ``message``; ProtocolError for anything else (a session's
    answer must hold one result and one series per kernel); MalformedAnswerError when it is not."""
    try:
        if isinstance(request, EvaluateRequest):
            return EvaluationAnswer.model_validate(message)
        answer = SessionAnswer.model_validate(message)
    except ValidationError as exc:
        raise MalformedAnswerError(
            f"the worker answered a malformed result ({_first(exc)})"
        ) from None
    count = len(request.kernels)
    if len(answer.results) != count or len(answer.round_s) != count:
        raise MalformedAnswerError("the worker answered a malformed session")
    return answer


def _first(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def send(self, message: BaseModel | dict[str, Any]) -> None:
        text = message.model_dump_json() if isinstance(message, BaseModel) else json.dumps(message)
        self.sock.sendall(text.encode() + b"\n")

    def recv(self, timeout_s: float | None) -> dict[str, Any] | None:
        """The next message, or None when ``timeout_s`` passes first; EOFError when closed."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_MESSAGE_BYTES:
                raise ProtocolError("a worker message exceeded the size limit")
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.sock], [], [], remaining)
            if not ready:
                return None
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("worker closed the channel")
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise ProtocolError(f"unreadable worker message: {exc}") from None
        if not isinstance(message, dict):
            raise ProtocolError("worker message is not an object")
        return message

    def close(self) -> None:
        self.sock.close()


# -- what kernels print ----------------------------------------------------------------------------

LOG_NAME = "output.log"  # in the worker's scratch folder: its stdout and stderr, read by the parent


def read_log(scratch: Path, cap: int) -> str:
    """The first ``cap`` bytes of what kernels printed, with a note of how much more there was."""
    path = scratch / LOG_NAME
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(cap)
    except OSError:
        return ""
    text = head.decode("utf-8", errors="replace")
    return text + (f"\n[... {size - cap} more bytes not kept]" if size > cap else "")
