"""What the steps of an evaluation in the worker share: how a step fails (``Failed``) and how it
tells the parent where it is (``Report``: the phase it enters, whose deadline the parent applies,
``protocol.Phase``)."""

from __future__ import annotations

from typing import Protocol

from accelopt.backends.status import Status


class Failed(Exception):
    """A kernel failed a step: carries the status and a short reason (``service``: why the
    service, not the kernel, failed it)."""

    def __init__(self, status: Status, error: str, service: str = "") -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.service = service  # not the kernel's failure: the service's (KernelMeasurement)


class Report(Protocol):
    """Tells the parent which phase the worker enters (and what of it: ``seed 2 of 5``)."""

    def __call__(self, name: str, detail: str = "") -> None: ...
