"""A device whose kernel process is a given pid, stopped and continued as ``KernelHostDevice.pause``
and ``resume`` do it (SIGSTOP, SIGCONT); its buffers are the host's. Importable as
``stoppable``."""

from __future__ import annotations

import os
import signal

from accelopt.backends.device import HostDevice


class Stoppable(HostDevice):
    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid

    @property
    def kernel_pids(self) -> tuple[int, ...]:  # type: ignore[override]
        return (self.pid,)

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)
