"""``KernelMeasurement``: what the worker measured of one kernel, declared once.

The worker's answer (``worker/protocol.KernelResult``) is this plus what only the parent needs to
score it (the control's figures, the slices' medians, whether kernel code ran in the worker); the
``Evaluation`` is this plus the parent's verdict and figures (status, % of peak, the widened
interval, the ceiling). Both extend it, so a field the worker measures is declared here and
carried into the evaluation whole (``KernelMeasurement.measured``), never copied field by field.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class KernelMeasurement(BaseModel):
    latency_s: float | None = None  # median of the timed calls
    min_s: float | None = None
    noise: float | None = None  # IQR / median of the timed calls
    calls: int = 0  # timed calls
    load_others: float | None = None  # share of the machine's CPUs others used while timed
    load_steal: float | None = None  # share of CPU time the hypervisor stole while timed
    placement: str = ""  # the CPUs the kernel's threads were bound to while timed ("CPU 0")
    # Timing stopped early inside a search: clearly slower than its parent (``race_s``); the
    # figures are what it had then, never a final figure for reports or the evaluation cache
    raced: bool = False
    # Batches timed while a thread of the kernel (or the worker's timing thread) waited for a
    # CPU another process held are left out (``worker/disturbance.py``): how many were, and how
    # many were kept (None: the signal is unavailable here, every batch kept). ``disturbed``: too
    # few were clean, and the figures are of a disturbed machine: never cached as final, never
    # used to rank, never exported as evidence
    disturbed_batches: int | None = None
    clean_batches: int | None = None
    disturbed: bool = False
    # The median over batches of each batch's time less the longest wait of one of the
    # kernel's threads for a CPU: an estimate of the latency undisturbed (exact where its threads
    # waited at the same moments, high where they waited in turn), which a disturbed kernel is
    # judged slower by (``selection.slower``: a lesson's hint, never a verdict on the best)
    floor_s: float | None = None
    # Not the kernel's verdict: why the service could not do the evaluation (a disk full or
    # read-only while building, a worker killed from outside, a lost node, a harness fault);
    # "" when the kernel earned its status. Never cached, never used to rank (``faults.py``)
    service: str = ""
    max_rel_err: float | None = None  # worst relative L2 error over seeds and outputs
    rotation_sets: int | None = None
    batch_calls: int | None = None  # timed calls per round trip (cpu: the kernel's own process)
    compile_s: float | None = None
    compile_cached: bool = False
    check_s: float | None = None
    time_s: float | None = None
    network_isolated: bool | None = None  # the worker's network namespace (set by the parent)
    # The layers the kernel's process ran under (cpu: kernel_host.c's facts, e.g. seccomp, uid)
    isolation: dict[str, str] | None = None
    log: str = ""  # what the kernels printed (stdout/stderr), capped

    def measured(self) -> dict[str, Any]:
        """This part's fields and values, to carry into another record that extends it."""
        return {name: getattr(self, name) for name in KernelMeasurement.model_fields}
