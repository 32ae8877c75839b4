"""The ``Evaluation`` record: one kernel measured on one workload and judged. A failure is data,
with a log."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from accelopt.backends.status import Status
from accelopt.hardware.roofline import Bound
from accelopt.profiling.measurement import KernelMeasurement
from accelopt.profiling.stats import is_busy


class Evaluation(KernelMeasurement):
    """One kernel on one workload: the worker's measurement (``KernelMeasurement``: the latency,
    the error, the isolation, the log) and, here, what the parent made of it: the verdict, the %
    of peak against a ceiling with its interval, and where it was measured."""

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
    # 95 % interval of the median latency: this timing's own, widened by the machine's drift
    # between evaluations (``drift``), so that it covers another evaluation's median
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    session_ci: float | None = None  # the median's half-width within this timing alone (0.01)
    drift: float | None = None  # the machine's drift between evaluations (``hardware.drift``)
    # The figure the search and the tables use: ``ceiling`` says against which. "calibrated":
    # the roofline time at the figure of the control timed with the kernel (``control_rate``);
    # "cached": at this hardware's cached ceiling. Always pct_of_peak = peak_s / latency_s.
    peak_s: float  # roofline time against that ceiling
    pct_of_peak: float | None = None  # peak_s / latency_s, a fraction (1.0 = 100 %)
    pct_low: float | None = None  # its 95 % interval (drift between evaluations included)
    pct_high: float | None = None
    ceiling: str = "cached"  # "calibrated" or "cached"
    cached_peak_s: float | None = None  # roofline time at the cached ceiling (``hardware``)
    cached_pct: float | None = None  # cached_peak_s / latency_s: what SUSPICIOUS is judged on
    # Against the control timed with the kernel (``parent/calibration.py``), whether or not it is
    # the figure above (``EvalConfig.headline``): roofline time at the control's figure, the %
    # and its 95 % interval (drift between evaluations included)
    calibrated_peak_s: float | None = None
    calibrated_pct: float | None = None
    calibrated_low: float | None = None
    calibrated_high: float | None = None
    control_rate: float | None = None  # the control's figure while timed (FLOP/s or bytes/s)
    control: str = ""  # what the control was, or why the figure is not calibrated
    bound: Bound  # the roofline term that sets peak_s
    tolerance: float
    seeds: list[int] = Field(default_factory=list)
    threads: int | None = None
    wall_s: float | None = None
    # when it was measured (ISO 8601, UTC; "" in records from before): a figure another run reads
    # from the evaluation cache says when it was taken, and its load (``load_others``) under what
    measured_at: str = ""

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
    def calibrated(self) -> bool:
        return self.ceiling == "calibrated"

    @property
    def loaded(self) -> bool:
        """Whether others used enough of the machine during the timing to move it."""
        return is_busy(self.load_others, self.load_steal)
