"""Issue 46, defect 2: one ceiling per table, and ``% = peak ms / ms`` in every row.

The user's case: ``bench run`` showed the matmul expert at 9.80 ms against a "peak ms" of 9.609 as
39.9 % (the calibrated figure, whose peak was not shown), and ``eval`` showed ``% peak 7.1%``,
``cached 7.1%`` and ``calibrated 1.9%`` side by side. Each table the CLI prints of kernel figures
(``bench run``, ``eval``, ``optimize``'s run table and suite table) is parsed as the user reads it
(``rendered_tables``) and every % is recomputed from that table's own peak and ms columns; the
rate achieved stands beside it, and a table scored against provisional ceilings says so on its
first line. ``bench run`` and ``eval`` run in-process with a fake runner behind the real
``CachedProfiler`` (no timing): it scores each job as the ``Evaluator`` does, and calibrates the
matmul rows against a control 2.46 times the cached ceiling, as on the user's busy VM.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import pytest
from evaluations import changed
from rendered_tables import (
    check_one_ceiling,
    pairs,
    parse_tables,
    render,
    within_rounding,
)
from rich.table import Table
from runners import RunsOnly
from specs import make_spec
from typer.testing import CliRunner

from accelopt.backends.kernel import Kernel
from accelopt.cli import app as app_module
from accelopt.cli import bench, common
from accelopt.cli.one_ceiling import PROVISIONAL, Roof, RunCeiling, roof_at, run_ceiling
from accelopt.cli.run_tables import result_table, suite_results_table
from accelopt.formatting import achieved
from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.client import Usage
from accelopt.problems import Problem, load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.parent.scoring import build_evaluation, workload_roofline
from accelopt.profiling.profiler import Job, Measured
from accelopt.profiling.worker.protocol import KernelResult
from accelopt.search.references import BestReference
from accelopt.search.summary import KernelSummary, RunSummary
from accelopt.store.records import RunStatus

QUIET = make_spec(name="cpu:quiet", matmul_rate=100e9, vector_rate=50e9, bandwidth=20e9)
BUSY = QUIET.model_copy(update={"provisional": True})
# % of the cached roofline each kind reaches (the matmul expert: 9.609 / 9.80 ms)
PCT = {"baseline": 0.30, "expert": 9.609 / 9.80, "numpy": 0.5, "kernel.c": 9.609 / 9.80}
CONTROL = 2.46  # the control's figure over the cached ceiling: the calibrated % is 39.9 %


class FakeRunner(RunsOnly):
    """Scores each job as ``Evaluator`` does (``build_evaluation`` on a fixed worker result), the
    matmul-bound ones calibrated against a control ``CONTROL`` times the cached ceiling (what the
    search ranks them by: ``EvalConfig.headline``)."""

    threads = 2
    capacity = 1

    def __init__(self, hardware: HardwareSpec) -> None:
        self.hardware = hardware

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        for i, job in enumerate(jobs):
            yield Measured(i, scored(job, self.hardware))

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def scored(job: Job, hardware: HardwareSpec) -> Evaluation:
    kernel, problem, workload = job
    peak = workload_roofline(problem, workload, hardware).peak_s
    latency = peak / PCT.get(kernel.name, 0.2)
    result = KernelResult(latency_s=latency, min_s=latency, calls=20,
                          ci_low_s=latency * 0.99, ci_high_s=latency * 1.01)  # fmt: skip
    evaluation = build_evaluation(job, hardware, 2, result)
    if evaluation.bound != "matmul":
        return evaluation
    calibrated = peak / CONTROL
    return changed(
        evaluation,
        ceiling="calibrated",
        peak_s=calibrated,
        pct_of_peak=calibrated / latency,
        calibrated_peak_s=calibrated,
        calibrated_pct=calibrated / latency,
        control_rate=hardware.matmul_rate * CONTROL,
        control="fma: while timed",
    )


@pytest.fixture(params=[BUSY, QUIET], ids=["provisional", "quiet"])
def spec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> HardwareSpec:
    """``bench run`` and ``eval`` on ``spec``'s ceilings, measured by a ``FakeRunner``."""

    def make_profiler(
        kind: str, hardware: HardwareSpec, config: EvalConfig | None = None, **_: object
    ) -> CachedProfiler:
        return CachedProfiler(kind, hardware, config or EvalConfig(), FakeRunner(hardware))

    for module in (bench, app_module):
        monkeypatch.setattr(module, "make_profiler", make_profiler)
    monkeypatch.setattr(common, "hardware_for", lambda backend, announce=True: request.param)
    return request.param


def says_provisional(first_line: str, hardware: HardwareSpec) -> bool:
    shown = first_line.strip().startswith(PROVISIONAL)
    assert shown == hardware.provisional, first_line
    return shown


def test_bench_run_scores_every_row_against_its_peak_column(spec, tmp_path):
    target = tmp_path / "suite.json"
    args = ["run", "--problem", "matmul", "--problem", "silu", "--kernel", "baseline,expert,numpy",
            "--json", str(target)]  # fmt: skip
    result = CliRunner().invoke(bench.app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (table,) = parse_tables(result.stdout)
    says_provisional(table.first_line, spec)
    assert table.headers.count("peak ms") == 1
    assert check_one_ceiling(table) == 6  # 2 problems x (baseline %, expert %, numpy ms (%))
    by = {(r["problem"], r["kernel"]): r for r in json.loads(target.read_text())}
    matmul = next(row for row in table.rows if row["problem"] == "matmul")
    expert = by[("matmul", "expert")]
    # the user's row: 9.80 ms against 9.609 is 98.1 %, not the calibrated 39.9 %
    assert matmul["expert %"] == "98.1%" and f"{expert['pct_of_peak']:.1%}" == "39.9%"
    flops = load_problem("matmul").cost.at(load_problem("matmul").workload("cpu").sizes)
    assert matmul["expert achieved"] == achieved(flops.matmul_flops / expert["latency_s"], "matmul")
    assert matmul["expert achieved"].endswith(" GFLOP/s")
    silu = next(row for row in table.rows if row["problem"] == "silu")
    assert silu["expert achieved"].endswith(" GB/s")
    below = " ".join(" ".join(table.below).split())
    assert "% of peak = peak ms / ms" in below and "bandwidth 20.0 GB/s" in below
    assert "calibrated % of peak" in below and "'calibrated_pct'" in below  # where it went
    assert "*" not in " ".join(table.column("expert %"))  # no mix of ceilings to mark
    # the JSON keeps its shape: the figure the search uses, with its own peak
    assert expert["peak_s"] / expert["latency_s"] == pytest.approx(expert["pct_of_peak"])
    assert expert["cached_pct"] == pytest.approx(9.609 / 9.80)


def test_eval_shows_each_percent_beside_its_own_peak(spec, tmp_path):
    kernel = tmp_path / "kernel.c"
    kernel.write_text("void kernel(void) {}\n")  # the fake runner compiles nothing
    args = ["eval", "matmul", str(kernel), "--json", str(tmp_path / "e.json")]
    result = CliRunner().invoke(app_module.app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    table = parse_tables(result.stdout)[0]
    says_provisional(table.first_line, spec)
    for gone in ("% peak", "cached %"):  # three % side by side, one peak column
        assert gone not in table.headers
    assert [p[0] for p in pairs(table.headers)] == ["% of peak", "calibrated %"]
    assert check_one_ceiling(table) == 2
    (row,) = table.rows
    assert row["% of peak"] == "98.1%" and row["calibrated %"] == "39.9%"
    assert row["achieved"].endswith(" GFLOP/s")
    assert "calibrated peak ms: the roofline at the figure of a control" in " ".join(
        " ".join(table.below).split()
    )


def test_eval_of_a_memory_bound_kernel_has_no_calibrated_columns(spec, tmp_path):
    kernel = tmp_path / "kernel.c"
    kernel.write_text("void kernel(void) {}\n")
    result = CliRunner().invoke(app_module.app, ["eval", "silu", str(kernel)])
    assert result.exit_code == 0, result.output
    table = parse_tables(result.stdout)[0]
    assert "calibrated %" not in table.headers and check_one_ceiling(table) == 1
    assert table.rows[0]["achieved"].endswith(" GB/s")


def summary(run: str, problem: str, base_ms: float, best_ms: float, ref_ms: float) -> RunSummary:
    return RunSummary(
        run=run, problem=problem, workload="cpu", workloads=("cpu",), held_out=(),
        status=RunStatus.FINISHED, baseline=KernelSummary(base_ms * 1e-3, 0.9, "b" + run),
        best=KernelSummary(best_ms * 1e-3, 0.9, "t" + run), speedup=base_ms / best_ms,
        bound="matmul", usage={"executor": Usage(calls=2, tokens_in=10, tokens_out=5)},
        reference=BestReference("numpy", ref_ms * 1e-3), speedup_over_reference=ref_ms / best_ms,
    )  # fmt: skip


@pytest.mark.parametrize("hardware", [BUSY, QUIET], ids=["provisional", "quiet"])
def test_optimize_run_table_against_the_runs_peak(hardware):
    """The pct_of_peak a summary carries (0.9 here: the search's figure) is not what the table
    shows: its % is the run's peak over each row's ms."""
    run = summary("r1", "matmul", 12.0, 4.0, 5.0)
    ceiling = RunCeiling(Roof(3.0e-3, "matmul", 3.0e-3 * 100e9), {"br1": 1.5e-3, "tr1": 1.2e-3})
    shown = result_table(run, ceiling, hardware, "3.00x ± 4.7%", "speedup: re-timed together")
    (table,) = parse_tables(render(shown))
    says_provisional(table.first_line, hardware)
    assert table.below[0].strip() == "speedup: re-timed together"
    assert table.rows[1]["speedup"] == "3.00x ± 4.7%"
    assert check_one_ceiling(table) == 5  # 3 rows' % of peak, 2 calibrated (none for numpy)
    rows = {row["kernel"]: row for row in table.rows}
    assert rows["best"]["% of peak"] == "75.0%" and rows["best"]["calibrated %"] == "30.0%"
    assert rows["best"]["achieved"] == "75.0 GFLOP/s"
    assert rows["best reference: numpy"]["% of peak"] == "60.0%"
    assert rows["best reference: numpy"]["calibrated %"] == "—"


@pytest.mark.parametrize("hardware", [BUSY, QUIET], ids=["provisional", "quiet"])
def test_optimize_suite_table_against_each_runs_peak(hardware):
    runs = [
        (summary("r1", "matmul", 12.0, 4.0, 5.0), RunCeiling(Roof(3.0e-3, "matmul", 3e8))),
        (summary("r2", "silu", 2.0, 0.5, 1.0), RunCeiling(Roof(0.1e-3, "memory", 2e6))),
    ]
    (table,) = parse_tables(render(suite_results_table(runs, hardware)))
    says_provisional(table.first_line, hardware)
    assert check_one_ceiling(table) == 4
    silu = next(row for row in table.rows if row["problem"] == "silu")
    assert silu["best %"] == "20.0%" and silu["best achieved"] == "4.00 GB/s"
    geomean = table.rows[-1]
    assert geomean["best %"] == "38.7%"  # sqrt(75 % x 20 %)


def test_a_runs_ceiling_is_the_roofline_at_the_spec_with_each_calibrated_peak():
    matmul = load_problem("matmul")
    evaluations = [scored((Kernel(kind, "cpu", kind), matmul, "cpu"), QUIET)
                   for kind in ("expert", "baseline")]  # fmt: skip
    found = run_ceiling(evaluations, matmul, QUIET)
    assert found.roof.peak_s == workload_roofline(matmul, "cpu", QUIET).peak_s
    assert found.roof.bound == "matmul"
    cost = matmul.cost.at(matmul.workload("cpu").sizes)
    assert found.roof.work == cost.matmul_flops
    assert found.calibrated == {e.kernel_hash: e.calibration.peak_s for e in evaluations}
    assert len(found.calibrated) == 2
    # without the spec: the evaluation's own cached roofline; without the problem, no rate
    assert run_ceiling(evaluations, matmul).roof == found.roof
    alone = run_ceiling(evaluations)
    assert alone.roof.peak_s == pytest.approx(found.roof.peak_s) and alone.roof.work is None
    # several workloads: geometric means, as composite.combine scores them
    both = roof_at(matmul, "cpu+small", QUIET)
    peaks = [workload_roofline(matmul, w, QUIET).peak_s for w in ("cpu", "small")]
    assert both.peak_s == pytest.approx((peaks[0] * peaks[1]) ** 0.5)


def table_of(headers: Sequence[str], *rows: Sequence[str]) -> Table:
    table = Table()
    for col in headers:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    return table


def test_the_check_catches_a_percent_against_a_peak_the_table_does_not_show():
    """The helper itself: the old ``eval`` table's columns, and a % that is not peak / ms."""
    row = ("9.800", "9.609", "39.9%", "98.1%", "39.9%")
    old = table_of(("ms", "peak ms", "% peak", "cached %", "calibrated %"), row)
    with pytest.raises(AssertionError, match="a % column named '% peak'"):
        check_one_ceiling(parse_tables(render(old))[0])
    renamed = table_of(("ms", "peak ms", "% of peak", "cached %", "calibrated %"), row)
    with pytest.raises(AssertionError, match=r"'% of peak' 39\.9% is not peak ms"):
        check_one_ceiling(parse_tables(render(renamed))[0])
    unpaired = table_of(("ms", "peak ms", "cached %"), ("9.800", "9.609", "98.1%"))
    with pytest.raises(AssertionError, match="no 'cached ms' column"):
        check_one_ceiling(parse_tables(render(unpaired))[0])
    several = table_of(("ms", "peak ms", "peak ms"), ("1.000", "1.000", "2.000"))
    with pytest.raises(AssertionError, match="several peak columns"):
        check_one_ceiling(parse_tables(render(several))[0])
    assert within_rounding(98.1, 9.609, 9.800) and not within_rounding(98.4, 9.609, 9.800)
