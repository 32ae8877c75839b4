"""A device whose kernel process is a given pid, stopped and continued as ``RemoteDevice.pause``
and ``resume`` do it (SIGSTOP, SIGCONT). Importable as ``stoppable``."""

from __future__ import annotations

import os
import signal


class Stoppable:
    def __init__(self, pid: int) -> None:
        self.pid = pid

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)
