"""A tuned kernel's variants as a run records them, for ``search.variants.variant_tables``:
records, evaluations and a stored re-timing session, nothing timed (issue 46's case).

The kernel as written at 10 ms; BM=16 at 7.87 ms, 27 % faster by its own noisy evaluation (± 40 %,
so within the noise: never re-timed); BM=32 re-timed beside the kernel at 0.949x its time (a
speedup of 1.05x ± 4.7 %: not confirmed); BM=128 re-timed at 1.02x its time; BM=8 does not build.
Each evaluation is calibrated (its % of peak against a control timed with it: a peak of its own),
with the hardware's cached roofline time beside it.
"""

from __future__ import annotations

from accelopt.backends.status import Status
from accelopt.backends.tunables import render
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.retimings import RetimingRecord
from accelopt.store.records import KernelOrigin, KernelRecord

KERNEL = """#ifndef BM
#define BM 64 /* tune: 16 32 64 128 */
#endif
void kernel(const float *lhs, const float *rhs, float *out) { (void)lhs; (void)rhs; (void)out; }
"""
CACHED_PEAK = 2.5e-3  # the roofline time at the hardware's cached ceiling: one for every row


def record(h: str, bm: str | None, iteration: int = 1) -> KernelRecord:
    source = KERNEL if bm is None else render(KERNEL, {"BM": bm})
    origin = KernelOrigin.BASELINE if bm is None else KernelOrigin.TUNED
    return KernelRecord(h, source, "cpu", 0 if bm is None else iteration, origin, "start")


def evaluation(h: str, ms: float | None, ci: float, calibrated_peak_ms: float) -> Evaluation:
    """Calibrated: ``pct_of_peak`` against a control timed with this kernel (a peak of its own),
    the cached figure beside it, as the evaluator records them."""
    latency = None if ms is None else ms * 1e-3
    peak = calibrated_peak_ms * 1e-3
    return Evaluation(
        problem="matmul", workload="small", backend="cpu", kernel="k", kernel_hash=h,
        hardware="hw", status=Status.PASSED if latency else Status.COMPILE_ERROR,
        error="" if latency else "error: BM too large", latency_s=latency, noise=0.01,
        peak_s=peak, ceiling="calibrated", calibrated_peak_s=peak,
        calibrated_pct=peak / latency if latency else None,
        pct_of_peak=peak / latency if latency else None, cached_peak_s=CACHED_PEAK,
        cached_pct=CACHED_PEAK / latency if latency else None,
        ci_low_s=latency * (1 - ci) if latency else None,
        ci_high_s=latency * (1 + ci) if latency else None, session_ci=ci, bound="matmul",
        tolerance=2e-5,
    )  # fmt: skip


KERNELS = [record("start", None), record("noisy16", "16"), record("close32", "32"),
           record("slow128", "128"), record("broken", "8")]  # fmt: skip
EVALUATIONS = {
    "start": evaluation("start", 10.0, 0.05, 4.0),
    "noisy16": evaluation("noisy16", 7.87, 0.40, 2.0),  # 27 % faster, ± 40 %: never re-timed
    "close32": evaluation("close32", 9.6, 0.03, 4.5),  # re-timed: 0.949x of the kernel's time
    "slow128": evaluation("slow128", 9.8, 0.03, 5.0),
    "broken": evaluation("broken", None, 0.0, 4.0),
}
# a stored session (``stored_retimings``): the kernel as written first, its children after
SESSIONS = [
    RetimingRecord(("start", "close32", "slow128"), (1.0, 0.949, 1.02), (None, 0.047, 0.01))
]
