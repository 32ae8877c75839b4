"""The suite report of ``bench run --html``: built from a real suite run (the command line's
JSON, as ``bench run`` hands its evaluations over) and from a check-only one."""

from __future__ import annotations

import json

import pytest
from evaluations import changed
from report_helpers import SPEC, assert_self_contained, check_pct_columns, parse

from accelopt.backends.status import Status
from accelopt.hardware.cache import load_cpu_spec
from accelopt.problems.loader import load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.reports.suite_report import (
    render_suite_report,
    roofline_points,
    suite_report,
    write_suite_report,
)

KINDS = ("baseline", "expert", "numpy")
PROBLEMS = ("matmul", "silu")
FAST = ("--seeds", "2", "--min-calls", "3", "--min-time", "0.01")
SECTIONS = {"summary", "suite-table", "pct-of-peak", "roofline", "failures"}


def bench(run_cli, tmp_path, *extra: str) -> list[Evaluation]:
    target = tmp_path / "suite.json"
    problems = [arg for name in PROBLEMS for arg in ("--problem", name)]
    out = run_cli("bench", "run", "--workload", "small", *problems, *extra, "--json", target)
    assert out.returncode == 0, out.stderr
    return [Evaluation.model_validate(e) for e in json.loads(target.read_text())]


@pytest.fixture()
def machine(cli_env, monkeypatch):
    """The ceilings the command line used (seeded by cli_env)."""
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", cli_env["ACCELOPT_CACHE_DIR"])
    spec = load_cpu_spec(measure_if_missing=False)
    assert spec is not None
    return spec


def test_a_timed_suite_run_renders_table_bars_and_roofline(run_cli, tmp_path, machine):
    evaluations = bench(run_cli, tmp_path, *FAST)
    assert {e.hardware for e in evaluations} == {machine.key()}
    problems = [load_problem(name) for name in PROBLEMS]
    report = suite_report(evaluations, problems, machine, KINDS, "small workload",
                          notes=["numpy: test BLAS"])  # fmt: skip
    path = write_suite_report(tmp_path / "out" / "suite.html", report)
    html = path.read_text()
    page = parse(html)
    assert page.ids >= SECTIONS
    assert page.svg_parents == ["pct-of-peak", "roofline"]
    assert_self_contained(html, page)
    text = "".join(page.text)
    assert "matmul" in text and "silu" in text and "geomean" in text and "numpy: test BLAS" in text
    timed = [e for e in evaluations if e.latency_s is not None]
    points, _ = roofline_points(evaluations, {p.name: p for p in problems})
    assert timed and len(points) == len(timed)
    assert "no timed kernels" not in html


def test_a_check_only_suite_run_renders_with_empty_charts(run_cli, tmp_path, machine):
    evaluations = bench(run_cli, tmp_path, "--check-only", "--seeds", "1")
    problems = [load_problem(name) for name in PROBLEMS]
    report = suite_report(evaluations, problems, machine, KINDS, "check only")
    html = write_suite_report(tmp_path / "c.html", report).read_text()
    page = parse(html)
    assert page.ids >= SECTIONS and len(page.svg_parents) == 2
    assert "no timed kernels" in html
    assert all(e.passed for e in evaluations)  # shipped kernels pass


def _evaluation(problem: str, kind: str, status: Status, latency: float | None) -> Evaluation:
    return Evaluation(
        problem=problem, workload="small", backend="cpu", kernel=kind, kernel_hash=kind,
        hardware=SPEC.key(), status=status, error="boom <x>" if status != Status.PASSED else "",
        latency_s=latency, peak_s=1e-5, pct_of_peak=1e-5 / latency if latency else None,
        bound="matmul", tolerance=2e-5,
    )  # fmt: skip


def test_the_model_places_kernels_by_the_cost_model_and_lists_failures():
    matmul = load_problem("matmul")
    evaluations = [
        _evaluation("matmul", "baseline", Status.PASSED, 4e-5),
        _evaluation("matmul", "expert", Status.INCORRECT, None),
        _evaluation("matmul", "numpy", Status.PASSED, 2e-5),
    ]
    report = suite_report(evaluations, [matmul], SPEC, KINDS, "t")
    cost = matmul.cost.at(matmul.workload("small").sizes)
    flops = cost.matmul_flops + cost.vector_flops
    (baseline, numpy) = report.points
    assert baseline.intensity == pytest.approx(flops / cost.bytes)
    assert baseline.flops_per_s == pytest.approx(flops / 4e-5)
    assert numpy.kind == "numpy"
    assert [f.status for f in report.failures] == ["INCORRECT"]
    (row,) = report.rows
    assert [c.status for c in row.cells] == ["PASSED", "INCORRECT", "PASSED"]
    assert [m.count for m in report.means] == [1, 0, 1]
    assert report.means[0].pct == pytest.approx(0.25)


def test_every_cell_is_its_rows_peak_over_its_latency():
    """One ceiling for the table: a calibrated kernel's cell is against the
    row's peak too, not its control's."""
    matmul = load_problem("matmul")
    calibrated = changed(
        _evaluation("matmul", "expert", Status.PASSED, 2.5e-5),
        peak_s=7e-6,
        pct_of_peak=7e-6 / 2.5e-5,
        ceiling="calibrated",
        cached_peak_s=1e-5,
        calibrated_peak_s=7e-6,
    )
    evaluations = [_evaluation("matmul", "baseline", Status.PASSED, 4e-5), calibrated]
    report = suite_report(evaluations, [matmul], SPEC, KINDS, "t")
    assert [c.pct for c in report.rows[0].cells[:2]] == pytest.approx([0.25, 0.4])
    assert check_pct_columns(render_suite_report(report)) == 2
