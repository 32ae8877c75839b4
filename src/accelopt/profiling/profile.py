"""A kernel's profile for the agents: how fast, how far from each ceiling, what the compiler said.

Built from an ``Evaluation``, the problem's ``Cost`` on the workload, the ``HardwareSpec`` and the
backend's remarks; pure functions, so the planner's prompt is reproducible from stored records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from accelopt.formatting import giga_brief, latency_brief, percent
from accelopt.hardware.roofline import Bound
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems.records import Cost
from accelopt.profiling.evaluation import Evaluation

UNITS = {Bound.MATMUL: "GFLOP/s", Bound.VECTOR: "GFLOP/s", Bound.MEMORY: "GB/s"}


@dataclass(frozen=True)
class Profile:
    """What was measured of one kernel, in the roofline's terms.

    ``achieved`` holds the rate each cost term (a ``Bound``) reached (FLOP/s for ``matmul`` and
    ``vector``, bytes/s for ``memory``), ``ceilings`` the device's rate for the same term,
    ``utilization`` their ratio (1.0 = the ceiling). Terms the problem does not pay (zero cost)
    are left out. Without a timing (a failure, or a check-only evaluation) the measured fields
    are None/empty.
    """

    latency_s: float | None
    pct_of_peak: float | None
    bound: Bound | None
    noise: float | None
    peak_s: float | None
    achieved: dict[Bound, float] = field(default_factory=dict)
    utilization: dict[Bound, float] = field(default_factory=dict)
    status: str = ""
    error: str = ""
    remarks: tuple[str, ...] = ()
    ceilings: dict[Bound, float] = field(default_factory=dict)
    calibration: str = ""  # what the % of peak is against, where not the cached ceilings

    @property
    def timed(self) -> bool:
        return self.latency_s is not None


def build_profile(
    evaluation: Evaluation, cost: Cost, hardware: HardwareSpec, remarks: Sequence[str]
) -> Profile:
    """The profile of ``evaluation``; rates are each cost term divided by the median latency."""
    latency = evaluation.latency_s
    common = {
        "bound": evaluation.bound or None,
        "peak_s": evaluation.peak_s,
        "status": str(evaluation.status),
        "error": evaluation.error,
        "remarks": tuple(remarks),
        "calibration": evaluation.control if evaluation.calibrated else "",
    }
    if latency is None or latency <= 0:
        return Profile(latency_s=None, pct_of_peak=None, noise=None, **common)
    work = {
        Bound.MATMUL: cost.matmul_flops,
        Bound.VECTOR: cost.vector_flops,
        Bound.MEMORY: cost.bytes,
    }
    rates = {
        Bound.MATMUL: hardware.matmul_rate,
        Bound.VECTOR: hardware.vector_rate,
        Bound.MEMORY: hardware.bandwidth,
    }
    achieved = {term: amount / latency for term, amount in work.items() if amount > 0}
    return Profile(
        latency_s=latency,
        pct_of_peak=evaluation.pct_of_peak,
        noise=evaluation.noise,
        achieved=achieved,
        utilization={term: rate / rates[term] for term, rate in achieved.items()},
        ceilings={term: rates[term] for term in achieved},
        **common,
    )


def _pct(fraction: float) -> str:
    return percent(fraction, " %")


def render_profile(profile: Profile) -> str:
    """A compact text block for a prompt: status, latency, roofline, each ceiling, remarks."""
    lines = [f"status: {profile.status}"]
    if profile.error:
        error = profile.error.strip().splitlines()
        lines += ["error:", *(f"  {line}" for line in error)]
    roofline = ""
    if profile.peak_s is not None:
        bound = f", {profile.bound}-bound" if profile.bound else ""
        roofline = f"roofline {latency_brief(profile.peak_s)}{bound}"
    if profile.latency_s is None:
        if profile.status == "PASSED":
            lines.append("latency: not timed (checked for correctness only)")
        if roofline:
            lines.append(roofline)
    else:
        latency = f"latency: {latency_brief(profile.latency_s)} (median)"
        if profile.noise is not None:
            latency += f", noise ±{_pct(profile.noise)} (IQR / median)"
        lines.append(latency)
        if profile.pct_of_peak is not None:
            lines.append(f"{_pct(profile.pct_of_peak)} of peak: {roofline}".rstrip(": "))
            if profile.calibration:
                lines.append(f"  (calibrated against the {profile.calibration})")
        elif roofline:
            lines.append(roofline)
        for term, rate in profile.achieved.items():
            unit = UNITS.get(term, "/s")
            ceiling = profile.ceilings.get(term)
            of = f" of {giga_brief(ceiling)} {unit}" if ceiling else ""
            share = profile.utilization.get(term)
            pct = f" ({_pct(share)})" if share is not None else ""
            lines.append(f"{term}: achieved {giga_brief(rate)} {unit}{of}{pct}")
    if profile.remarks:
        lines.append("compiler vectorization remarks:")
        lines += [f"  {remark}" for remark in profile.remarks]
    return "\n".join(lines) + "\n"
