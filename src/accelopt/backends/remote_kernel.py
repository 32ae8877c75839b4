"""A kernel loaded in a process of its own (the cpu backend's kernel host, the triton backend's):
a call sends its buffers' handles there and waits; a bound call keeps the handles for the timing
loop, which the device sends in batches (``call_batch``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class Host(Protocol):
    """The process a kernel is loaded in."""

    def call_batch(self, calls: Sequence[tuple[int, ...]]) -> float: ...

    def kill(self) -> None: ...


@dataclass(frozen=True)
class BoundCall:
    """One call's buffer handles in the host (addresses, ids), bound ahead for the timing loop."""

    host: Host
    handles: tuple[int, ...]

    def __call__(self) -> None:
        self.host.call_batch([self.handles])


class RemoteKernel:
    """A kernel loaded in ``host``: ``handle`` names a buffer there (its address, its id)."""

    def __init__(self, host: Host, handle: Callable[[Any], int]) -> None:
        self.host = host
        self._handle = handle

    def __call__(self, arrays: Sequence[Any]) -> None:
        self.bind(arrays)()

    def bind(self, arrays: Sequence[Any]) -> BoundCall:
        return BoundCall(self.host, tuple(self._handle(a) for a in arrays))

    def close(self) -> None:
        self.host.kill()


def batch(calls: Sequence[Callable[[], None]], limit: int | None = None) -> list[tuple[int, ...]]:
    """The handles of a batch of calls bound by a ``RemoteKernel`` (a ValueError for any other
    call, or for more than ``limit``)."""
    handles = [c.handles for c in calls if isinstance(c, BoundCall)]
    if len(handles) != len(calls) or (limit is not None and len(calls) > limit):
        raise ValueError("a batch is calls bound by the device's kernel, at most its limit")
    return handles


class InOwnProcess:
    """The members of a device (``device.Device``) whose kernel runs in a process of its own,
    ``host``: pausing it, its pid, the layers it runs under."""

    host: Any  # the process: its pid, its facts, pause and resume

    def pause(self) -> None:
        """Stop the kernel's process between its calls."""
        self.host.pause()

    def resume(self) -> None:
        self.host.resume()

    @property
    def kernel_pids(self) -> tuple[int, ...]:
        """The kernel's process: its CPU time is the evaluation's, not other work's."""
        return (self.host.pid,)

    @property
    def isolation(self) -> dict[str, str]:
        """The layers the kernel's process got (its ``facts``)."""
        return dict(self.host.facts)
