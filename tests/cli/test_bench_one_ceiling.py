"""``bench run`` scores every row against one ceiling: the one its profiler ended with.

The user's case: the adamw baseline reached 68 % of a bandwidth ceiling of 26 GB/s measured on a
busy machine; the expert, 1.73x faster, beat it, the ceiling was re-measured and raised to
46 GB/s, and the expert scored 66.6 % against it, the baseline still 68 % against the old one.
A fake runner here scores each job as the ``Evaluator`` does (``scoring.build_evaluation`` on a
fixed worker result; a kernel that beats the roofline has the ceiling raised, once, and is scored
again), so the raise happens after the first evaluation; the command runs in-process (typer's
runner) with that runner behind the real ``CachedProfiler``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from evaluations import changed
from rendered_tables import check_one_ceiling, parse_tables
from runners import RunsOnly
from specs import make_spec
from typer.testing import CliRunner

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.cli import bench, common
from accelopt.formatting import latency as page_latency
from accelopt.formatting import milliseconds
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import Problem, load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.cache import CachedProfiler
from accelopt.profiling.parent.scoring import blames_the_ceiling, build_evaluation
from accelopt.profiling.profiler import Job, Measured
from accelopt.profiling.worker.protocol import KernelResult
from accelopt.views import evaluation_json

LOW = make_spec(name="cpu:busy", matmul_rate=1e15, vector_rate=1e15, bandwidth=26e9)
RAISED_BANDWIDTH = 46e9
# % of the low roofline each kind reaches: the expert 1.73x the baseline, above it
PCT_OF_LOW = {"baseline": 0.68, "expert": 0.68 * 1.73, "numpy": 0.30, "torch": 0.35,
              "inductor": 0.4, "max-autotune": 0.42}  # fmt: skip
CONTROL_RATE = 30e9  # the numpy rows are calibrated against a control of this figure


class RaisingRunner(RunsOnly):
    """Scores jobs in order against its spec, as ``Evaluator._scored`` does: one that beats the
    roofline has the bandwidth ceiling raised (once) and is scored again; the numpy rows come
    calibrated (a control timed with them), the others against the cached ceiling."""

    threads = 2
    capacity = 1

    def __init__(self, hardware: HardwareSpec) -> None:
        self.hardware = hardware
        self.raised = False

    def run(self, jobs: Sequence[Job]) -> Iterator[Measured]:
        for i, job in enumerate(jobs):
            yield Measured(i, self._scored(job))

    def _scored(self, job: Job) -> Evaluation:
        kernel, problem, workload = job
        cost = problem.cost.at(problem.workload(workload).sizes)
        latency = cost.bytes / LOW.bandwidth / PCT_OF_LOW[kernel.name]
        result = KernelResult(latency_s=latency, min_s=latency, calls=20,
                              ci_low_s=latency * 0.99, ci_high_s=latency * 1.01)  # fmt: skip
        evaluation = build_evaluation(job, self.hardware, self.threads, result)
        if blames_the_ceiling(evaluation.status, evaluation.pct_of_peak) and not self.raised:
            self.hardware = self.hardware.model_copy(update={"bandwidth": RAISED_BANDWIDTH})
            self.raised = True
            evaluation = build_evaluation(job, self.hardware, self.threads, result)
        if kernel.name == "numpy":
            peak_s = cost.bytes / CONTROL_RATE
            evaluation = changed(
                evaluation,
                ceiling="calibrated",
                peak_s=peak_s,
                pct_of_peak=peak_s / latency,
                calibrated_peak_s=peak_s,
                calibrated_pct=peak_s / latency,
                control_rate=CONTROL_RATE,
                control="memory 1:1: 30.0 GB/s",
            )
        return evaluation

    def retime(self, kernels: Sequence[Kernel], problem: Problem, workload: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


@pytest.fixture
def raising(monkeypatch: pytest.MonkeyPatch) -> list[RaisingRunner]:
    """``bench run`` on the low spec, measured by a ``RaisingRunner`` behind the real cache."""
    runners: list[RaisingRunner] = []

    def make_profiler(
        kind: str, hardware: HardwareSpec, config: EvalConfig | None = None, **_: object
    ) -> CachedProfiler:
        runners.append(RaisingRunner(hardware))
        return CachedProfiler(kind, hardware, config or EvalConfig(), runners[-1])

    monkeypatch.setattr(bench, "make_profiler", make_profiler)
    monkeypatch.setattr(common, "hardware_for", lambda backend, announce=True: LOW)
    return runners


def bench_run(tmp_path: Path, *extra: str) -> tuple[str, str, list[dict]]:
    target = tmp_path / "suite.json"
    args = ["run", "--problem", "adamw", "--problem", "silu", "--json", str(target), *extra]
    result = CliRunner().invoke(bench.app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr, json.loads(target.read_text())


def test_every_row_is_scored_against_the_ceiling_the_run_ended_with(raising, tmp_path):
    stdout, stderr, rows = bench_run(tmp_path, "--html", str(tmp_path / "suite.html"))
    (runner,) = raising
    assert runner.raised and runner.hardware.bandwidth == RAISED_BANDWIDTH
    final = runner.hardware.key()
    assert len(rows) == 12  # adamw and silu: baseline, expert, numpy and the 3 PyTorch kinds each
    assert {r["hardware"] for r in rows} == {final}  # the baseline too, scored before the raise
    assert {r["ceilings"]["cached"]["hardware"] for r in rows} == {final}
    assert {r["ceilings"]["cached"]["value"] for r in rows} == {RAISED_BANDWIDTH}
    for r in rows:
        assert r["status"] == "PASSED", r["error"]
        assert r["cached_pct"] == pytest.approx(r["cached_peak_s"] / r["latency_s"])
        assert r["pct_of_peak"] == pytest.approx(r["peak_s"] / r["latency_s"])
        assert r["ceilings"]["used"] == r["ceiling"]
        if r["ceiling"] == "cached":
            assert r["peak_s"] == r["cached_peak_s"]
    by = {(r["problem"], r["kernel"]): r for r in rows}
    for problem in ("adamw", "silu"):
        base, expert, numpy = (by[(problem, kind)] for kind in ("baseline", "expert", "numpy"))
        assert base["cached_peak_s"] == expert["cached_peak_s"] == numpy["cached_peak_s"]
        assert base["pct_of_peak"] == pytest.approx(0.68 * 26e9 / RAISED_BANDWIDTH)
        assert expert["pct_of_peak"] / base["pct_of_peak"] == pytest.approx(1.73)
        assert numpy["ceiling"] == "calibrated"
        assert numpy["ceilings"]["control"] == {
            "rate": CONTROL_RATE,
            "what": "memory 1:1: 30.0 GB/s",
        }

    # the table: every % in a row is against its one peak column, the ceiling the run ended with
    # (the numpy rows too, calibrated in the JSON: their calibrated figures are not in the table)
    (table,) = parse_tables(stdout)
    assert check_one_ceiling(table) == 12  # 2 problems x 6 kinds
    for problem in ("adamw", "silu"):
        row = next(r for r in table.rows if r["problem"] == problem)
        base, expert, numpy = (by[(problem, kind)] for kind in ("baseline", "expert", "numpy"))
        assert row["peak ms"] == milliseconds(base["cached_peak_s"])
        assert row["baseline %"] == f"{base['cached_pct']:.1%}"
        assert row["expert %"] == f"{expert['cached_pct']:.1%}"
        assert row["numpy ms (%)"] == (
            f"{milliseconds(numpy['latency_s'])} ({numpy['cached_pct']:.1%})"
        )
    text = " ".join(stdout.split())
    assert "calibrated % of peak (against a control timed with each kernel" in text
    assert "cpu:busy's cached ceilings" in text and "bandwidth 46.0 GB/s" in text
    assert "re-measured during the run (bandwidth 26.0 GB/s → 46.0 GB/s)" in " ".join(
        stderr.split()
    )

    # the HTML report: the same figures
    html = (tmp_path / "suite.html").read_text()
    assert "the row's peak (the roofline time of its workload at the cached ceilings" in html
    for problem in ("adamw", "silu"):
        assert page_latency(by[(problem, "baseline")]["cached_peak_s"]) in html
        assert f"{by[(problem, 'expert')]['cached_pct']:.1%}" in html  # that peak over its ms
    assert '<td>bandwidth</td><td class="num">46.0 GB/s</td>' in html  # the ceilings table


def test_without_a_raise_nothing_is_rescored_or_noted(raising, tmp_path, monkeypatch):
    monkeypatch.setitem(PCT_OF_LOW, "expert", 0.9)
    _, stderr, rows = bench_run(tmp_path)
    assert not raising[0].raised
    assert {r["hardware"] for r in rows} == {LOW.key()}
    assert "re-measured" not in stderr
    by = {(r["problem"], r["kernel"]): r for r in rows}
    assert by[("adamw", "baseline")]["pct_of_peak"] == pytest.approx(0.68)


def test_evaluation_json_names_the_ceilings_each_figure_used():
    silu = load_problem("silu")
    job = (Kernel(shipped_kernel(silu, "baseline").read_text(), "cpu", "baseline"), silu, "cpu")
    failed = build_evaluation(job, LOW, 2, KernelResult(status=Status.INCORRECT, error="x"))
    data = evaluation_json(failed, LOW)
    assert data["ceilings"] == {
        "used": "cached",
        "cached": {"hardware": LOW.key(), "name": "bandwidth", "value": LOW.bandwidth},
        "control": {"rate": None, "what": failed.control},
    }
    # without the spec (or with another one) the figure is not guessed
    assert evaluation_json(failed)["ceilings"]["cached"]["value"] is None
    other = LOW.model_copy(update={"bandwidth": 1e9})
    assert evaluation_json(failed, other)["ceilings"]["cached"]["value"] is None
    assert Evaluation.model_validate(data) == failed  # the extra key reads back as the record
