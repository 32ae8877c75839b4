"""What the reference kinds (numpy, torch, inductor, max-autotune) share: each times a problem's
own form on the host as a comparison point, so there is nothing untrusted to check, nothing to
export, and no device of its own."""

from __future__ import annotations

from typing import Any

from accelopt.backends.device import HostDevice
from accelopt.problems.records import Problem, Sizes

HOST_LOCK = "cpu"  # the host CPU's device lock, shared with every kernel timed on it


class HostReference:
    """The parts of a reference kind's backend that do not depend on the kind."""

    compiles_on_first_call = False

    def preflight(self, timing: bool = True) -> None:
        pass

    def device(self) -> HostDevice:
        return HostDevice()

    def lock_name(self) -> str:
        return HOST_LOCK

    def runs_on_gpu(self) -> bool:
        return False

    def export_recipe(self) -> dict[str, Any]:
        return {}

    def check(self, source: str) -> str | None:
        return None  # the problem's own form, not user code

    def remarks(self, source: str, problem: Problem, sizes: Sizes) -> list[str]:
        return []  # nothing is compiled for a user to read about
