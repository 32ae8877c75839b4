"""A fake autotune run written straight into a store, for the report and the dashboard: matmul on
its `cpu` workload, a kernel declaring two tunables (BM and UNROLL), its eight variants with
latencies that depend on both (one fails to build, one was raced), a re-timing session that
confirmed the fastest, a NumPy reference, and evaluations whose headline figure is calibrated
(a control's peak of 1.4 ms where the cached ceilings give 2.013 ms): the report must keep the
two apart. No timing runs: every figure is fixed here."""

from __future__ import annotations

from report_helpers import SPEC

from accelopt.backends.status import Status
from accelopt.backends.tunables import render
from accelopt.hardware.roofline import roofline
from accelopt.problems.loader import load_problem
from accelopt.profiling.config import harness_key
from accelopt.profiling.evaluation import Evaluation
from accelopt.store.records import IterationRecord, KernelRecord, RunRecord
from accelopt.store.store import Store

RUN = "tunerun00001"
WORKLOAD = "cpu"
CALIBRATED_PEAK_S = 1.4e-3  # the control's roofline time, per the (fake) control's rate

SOURCE = """#ifndef BM
#define BM 64 /* tune: 32 64 128 */
#endif
#ifndef UNROLL
#define UNROLL 1 /* tune: 1 2 4 */
#endif
void kernel(const float *a, const float *b, float *c) { /* blocked by BM, unrolled */ }
"""
_BM = {"32": 1.3, "64": 1.0, "128": 0.85}
_UNROLL = {"1": 1.0, "2": 0.8, "4": 0.9}
BROKEN = ("32", "4")  # does not build
RACED = ("32", "1")  # stopped timing early: clearly slower
NOISY = ("64", "4")  # a wide interval
BEST = ("128", "2")


def cached_peak_s() -> float:
    """matmul on `cpu` at the test ceilings: 1.007 GFLOP at 500 GFLOP/s (matmul-bound)."""
    problem = load_problem("matmul")
    return roofline(problem.cost.at(problem.workload(WORKLOAD).sizes), SPEC).peak_s


def latency_s(bm: str, unroll: str) -> float:
    return 8e-3 * _BM[bm] * _UNROLL[unroll]


def kernel_hash(bm: str, unroll: str) -> str:
    return "base" if (bm, unroll) == ("64", "1") else f"v{bm}x{unroll}"


def evaluation(key: str, latency: float | None, half: float = 0.04, kernel: str = "") -> Evaluation:
    """Timed (``latency``) or broken; scored as the search does for a matmul: the headline
    against the control (calibrated), the cached ceilings kept beside it."""
    peak = cached_peak_s()
    if latency is None:
        return Evaluation(problem="matmul", workload=WORKLOAD, backend="cpu", kernel=key,
                          kernel_hash=key, hardware=SPEC.key(), status=Status.COMPILE_ERROR,
                          error="error: BM*UNROLL too large", peak_s=peak, cached_peak_s=peak,
                          bound="matmul", tolerance=1e-4)  # fmt: skip
    return Evaluation(
        problem="matmul", workload=WORKLOAD, backend="cpu", kernel=kernel or key, kernel_hash=key,
        hardware=SPEC.key(), status=Status.PASSED, latency_s=latency,
        ci_low_s=latency / (1 + half), ci_high_s=latency * (1 + half), session_ci=half / 2,
        drift=half / 2, peak_s=CALIBRATED_PEAK_S, pct_of_peak=CALIBRATED_PEAK_S / latency,
        pct_low=CALIBRATED_PEAK_S / latency / (1 + half),
        pct_high=CALIBRATED_PEAK_S / latency * (1 + half), ceiling="calibrated",
        cached_peak_s=peak, cached_pct=peak / latency, calibrated_peak_s=CALIBRATED_PEAK_S,
        calibrated_pct=CALIBRATED_PEAK_S / latency, control_rate=719e9,
        control="fma chains: 719.0 GFLOP/s while timed", bound="matmul", tolerance=1e-4,
    )  # fmt: skip


def make_tuned_run(store: Store, run_id: str = RUN) -> RunRecord:
    """The autotune run (see the module's docstring); its best is BM=128 UNROLL=2."""
    spec = {"search": {"strategy": "autotune", "variants": 8, "iterations": 2},
            "hardware_spec": SPEC.model_dump(mode="json"), "workloads": [WORKLOAD]}  # fmt: skip
    run = RunRecord(id=run_id, problem="matmul", workload=WORKLOAD, backend="cpu",
                    hardware=SPEC.key(), strategy="autotune", spec=spec)  # fmt: skip
    store.create_run(run)
    store.add_kernel(run_id, KernelRecord("base", SOURCE, "cpu", 0, "baseline"))
    store.put_evaluation(evaluation("base", latency_s("64", "1")))
    for bm in _BM:
        for unroll in _UNROLL:
            if (bm, unroll) == ("64", "1"):
                continue
            key = kernel_hash(bm, unroll)
            source = render(SOURCE, {"BM": bm, "UNROLL": unroll})
            store.add_kernel(run_id, KernelRecord(key, source, "cpu", 1, "tuned", "", "autotune"))
            latency = latency_s(bm, unroll)
            if (bm, unroll) == BROKEN:
                store.put_evaluation(evaluation(key, None))
            elif (bm, unroll) == RACED:
                raced = harness_key("") + "+raced:base"
                store.put_evaluation(evaluation(key, latency), harness_version=raced)
            else:
                half = 0.3 if (bm, unroll) == NOISY else 0.04
                store.put_evaluation(evaluation(key, latency, half))
    best, second = kernel_hash(*BEST), kernel_hash("64", "2")
    store.put_retiming(run_id, 1, ["base", best, second],
                       {"ratios": [1.0, 0.69, 0.81], "ratio_ci": [0.0, 0.02, 0.025]})  # fmt: skip
    store.put_reference(run_id, evaluation("numpy", 3.0e-3, kernel="numpy"))
    for t, kept in ((0, "base"), (1, best), (2, best)):
        latency = store.get_evaluation(kept, "matmul", WORKLOAD, SPEC.key()).latency_s  # type: ignore[union-attr]
        store.commit_iteration(run_id, IterationRecord(
            t, (kept,), kept, latency, CALIBRATED_PEAK_S / latency, 0.0, 0 if t == 0 else 8,
        ))  # fmt: skip
    store.update_run(run_id, status="finished", best_hash=best)
    return store.get_run(run_id)  # type: ignore[return-value]
