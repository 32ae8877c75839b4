"""The ``Evaluation`` record: one kernel measured on one workload and judged. A failure is data,
with a log."""

from __future__ import annotations

from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    model_serializer,
    model_validator,
)

from accelopt.backends.status import Status
from accelopt.hardware.roofline import Bound
from accelopt.profiling.measurement import KernelMeasurement
from accelopt.profiling.stats import is_busy


class CeilingFigure(BaseModel):
    """A kernel against one ceiling: the roofline time there, and the kernel's fraction of it
    (``peak_s / latency_s``) with its 95 % interval where one was stated."""

    model_config = ConfigDict(frozen=True)

    peak_s: float
    pct: float | None = None
    low: float | None = None
    high: float | None = None


class ControlFigure(CeilingFigure):
    """A kernel against the control timed with it (``parent/calibration.py``): the roofline at
    the control's figure, and that figure (FLOP/s or bytes/s)."""

    rate: float | None = None


STORED = "stored"  # the validation context of a record read back from the store (``stored``)

# Each group's fields as the JSON a user reads (and the cache keeps) have them, flat
FLAT = {
    "cached": {"peak_s": "cached_peak_s", "pct": "cached_pct"},
    "calibration": {
        "peak_s": "calibrated_peak_s",
        "pct": "calibrated_pct",
        "low": "calibrated_low",
        "high": "calibrated_high",
        "rate": "control_rate",
    },
}
_GROUPS = {"cached": CeilingFigure, "calibration": ControlFigure}


class Evaluation(KernelMeasurement):
    """One kernel on one workload: the worker's measurement (``KernelMeasurement``: the latency,
    the error, the isolation, the log) and, here, what the parent made of it: the verdict, the %
    of peak against a ceiling with its interval, and where it was measured."""

    # an infinite error stays a float in the JSON a user reads (``model_dump``) and is written
    # as JSON's Infinity, as the store writes it, not as null
    model_config = ConfigDict(frozen=True, ser_json_inf_nan="constants")

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
    # Against the cached ceiling of ``hardware``: what SUSPICIOUS is judged on
    cached: CeilingFigure | None = None
    # Against the control timed with the kernel, whether or not it is the figure above
    # (``EvalConfig.headline``); its interval includes the drift between evaluations
    calibration: ControlFigure | None = None
    control: str = ""  # what the control was, or why the figure is not calibrated
    bound: Bound  # the roofline term that sets peak_s
    tolerance: float
    seeds: list[int] = Field(default_factory=list)
    threads: int | None = None
    wall_s: float | None = None
    # when it was measured (ISO 8601, UTC; "" in records from before): a figure another run reads
    # from the evaluation cache says when it was taken, and its load (``load_others``) under what
    measured_at: str = ""

    @model_validator(mode="before")
    @classmethod
    def _grouped(cls, data: Any) -> Any:
        """The flat fields of the JSON a user reads and the cache keeps (``FLAT``) into their
        figures."""
        if not isinstance(data, dict) or not any(
            f in data for g in FLAT.values() for f in g.values()
        ):
            return data
        data = dict(data)
        for group, fields in FLAT.items():
            values = {name: data.pop(flat, None) for name, flat in fields.items()}
            if values["peak_s"] is not None and data.get(group) is None:
                data[group] = _GROUPS[group](**values)
        return data

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The JSON a user reads and the cache keeps: each figure's fields flat (``FLAT``)."""
        flat: dict[str, Any] = {}
        for key, value in handler(self).items():
            if key in FLAT:  # in the group's place, so the JSON keeps its order too
                flat.update({f: (value or {}).get(name) for name, f in FLAT[key].items()})
            else:
                flat[key] = value
        return flat

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Self:
        """The status and the fields present tell one story: a verdict other than PASSED says
        why; a % of peak or a SUSPICIOUS verdict rests on a latency; an interval has both ends;
        a calibrated figure has its control's."""
        wrong = _inconsistency(self, stored=bool(info.context and info.context.get(STORED)))
        if wrong:
            raise ValueError(f"an inconsistent evaluation of {self.kernel}: {wrong}")
        return self

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


def stored(data: str | bytes) -> Evaluation:
    """An evaluation read back from the store: one written before every failure said why may
    have no reason, and is read as it is (a user's runs stay readable)."""
    return Evaluation.model_validate_json(data, context={STORED: True})


def _inconsistency(e: Evaluation, stored: bool = False) -> str:
    """What in ``e`` contradicts its status or its other fields ("" when nothing does)."""
    if e.status is Status.PASSED and e.error:
        return f"PASSED with an error ({e.error!r})"
    if e.status is not Status.PASSED and not e.error and not stored:
        return f"{e.status.value} without saying why"
    if e.latency_s is None and (e.pct_of_peak is not None or e.status is Status.SUSPICIOUS):
        return "a % of peak, or SUSPICIOUS, without a latency"
    if (e.ci_low_s is None) != (e.ci_high_s is None):
        return "one end of the latency's interval"
    if e.ceiling == "calibrated" and e.calibration is None:
        return "a calibrated figure without the control's roofline"
    return ""
