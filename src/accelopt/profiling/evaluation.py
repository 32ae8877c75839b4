"""The ``Evaluation`` record: one kernel measured on one workload. A failure is data, with a log."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from accelopt.backends.status import Status
from accelopt.hardware.roofline import Bound
from accelopt.profiling.worker.contention import is_busy


class Evaluation(BaseModel):
    model_config = ConfigDict(frozen=True)

    problem: str
    workload: str
    backend: str
    # a workspace problem's fingerprint (its files' hash; '' for the suite's): part of the key
    # the evaluation is cached under, so an edited problem is measured again
    problem_version: str = ""
    kernel: str  # a label: file name or kind
    kernel_hash: str
    hardware: str  # HardwareSpec.key()
    status: Status
    error: str = ""  # short and human-readable; empty when PASSED
    latency_s: float | None = None  # median of the timed calls
    min_s: float | None = None
    noise: float | None = None  # IQR / median of the timed calls
    calls: int = 0  # timed calls
    ci_low_s: float | None = None  # 95 % confidence interval of the median latency
    ci_high_s: float | None = None
    load_others: float | None = None  # share of the machine's CPUs others used while timed
    load_steal: float | None = None  # share of CPU time the hypervisor stole while timed
    peak_s: float  # roofline time on this hardware
    pct_of_peak: float | None = None  # peak_s / latency_s, a fraction (1.0 = 100 %)
    bound: Bound  # the roofline term that sets peak_s
    max_rel_err: float | None = None  # worst relative L2 error over seeds and outputs
    tolerance: float
    seeds: list[int] = []
    threads: int | None = None
    rotation_sets: int | None = None
    batch_calls: int | None = None  # timed calls per round trip (cpu: the kernel's own process)
    compile_s: float | None = None
    compile_cached: bool = False
    check_s: float | None = None
    time_s: float | None = None
    wall_s: float | None = None
    network_isolated: bool | None = None
    # The layers the kernel's process ran under (cpu: executor.c's facts, e.g. seccomp, uid)
    isolation: dict[str, str] | None = None
    log: str = ""  # the kernel's stdout/stderr, capped

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @property
    def ci(self) -> float | None:
        """The median's 95 % interval as a fraction of it, ± (0.01: known to within 1 %)."""
        if self.latency_s is None or self.ci_low_s is None or self.ci_high_s is None:
            return None
        return (self.ci_high_s - self.ci_low_s) / (2 * self.latency_s)

    @property
    def loaded(self) -> bool:
        """Whether others used enough of the machine during the timing to move it."""
        return is_busy(self.load_others, self.load_steal)
