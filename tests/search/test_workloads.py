"""The workloads of a run: choosing them, what a run records, and the generalization table."""

from __future__ import annotations

import pytest

from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.problems import load_problem
from accelopt.profiling.evaluation import Evaluation
from accelopt.search.workloads import (
    RunWorkloads,
    choose_workloads,
    group_figures,
    run_workloads,
    workload_figures,
)
from accelopt.search.workloads import (
    WorkloadRole as Role,
)
from accelopt.store.records import RunRecord


def ev(workload: str, latency: float | None, status: Status = Status.PASSED) -> Evaluation:
    return Evaluation(
        problem="matmul", workload=workload, backend="cpu", kernel="k", kernel_hash="h",
        hardware="hw", status=status, error="" if status is Status.PASSED else "failed",
        latency_s=latency, peak_s=1e-4,
        pct_of_peak=1e-4 / latency if latency else None, bound="matmul", tolerance=1e-5,
    )  # fmt: skip


def test_choose_workloads_checks_what_the_user_named():
    matmul = load_problem("matmul")
    chosen = choose_workloads(matmul, ["small", "cpu"], ["tiny"])
    assert chosen.primary == "small" and chosen.all == ("small", "cpu", "tiny")
    assert chosen.several and chosen.held_out == ("tiny",)
    assert choose_workloads(matmul, [], []) == RunWorkloads(("cpu",))
    assert not choose_workloads(matmul, ["small"]).several  # recorded as runs always were
    with pytest.raises(UserError, match="no workload 'huge'; choose one of"):
        choose_workloads(matmul, ["cpu"], ["huge"])
    with pytest.raises(UserError, match="named twice"):
        choose_workloads(matmul, ["cpu", "small"], ["small"])


def test_a_held_out_workload_with_the_sizes_of_a_tuned_one_is_refused():
    matmul = load_problem("matmul")
    same = {**matmul.workloads, "alias": matmul.workloads["small"]}
    problem = type(matmul)(**{**vars(matmul), "workloads": same})
    with pytest.raises(UserError, match="has the sizes of tuned workload small"):
        choose_workloads(problem, ["small"], ["alias"])


def test_a_run_recorded_before_several_workloads_has_its_one():
    run = RunRecord("r", "matmul", "cpu", "cpu", "hw", "beam", spec={})
    assert run_workloads(run) == RunWorkloads(("cpu",))
    several = RunRecord("r", "matmul", "a", "cpu", "hw", "beam",
                        spec={"workloads": ["a", "b"], "held_out": ["c"]})  # fmt: skip
    assert run_workloads(several) == RunWorkloads(("a", "b"), ("c",))


def test_the_generalization_table_and_its_geomeans():
    chosen = RunWorkloads(("a", "b"), ("c", "d"))
    baseline = {"a": ev("a", 4e-3), "b": ev("b", 1e-3), "c": ev("c", 2e-3), "d": ev("d", 1e-3)}
    best = {"a": ev("a", 1e-3), "b": ev("b", 0.25e-3), "c": ev("c", 2e-3),
            "d": ev("d", None, Status.INCORRECT)}  # fmt: skip
    rows = workload_figures(chosen, {"a": {"M": 1}}, baseline, best)
    assert [(r.workload, r.role) for r in rows] == [
        ("a", Role.TUNED), ("b", Role.TUNED), ("c", Role.HELD_OUT), ("d", Role.HELD_OUT),
    ]  # fmt: skip
    assert rows[0].sizes == {"M": 1} and rows[1].sizes == {}
    assert rows[0].speedup == pytest.approx(4.0) and rows[2].speedup == pytest.approx(1.0)
    assert rows[3].speedup is None and rows[3].best_status == "INCORRECT"
    tuned, held = group_figures(rows)
    assert tuned.role == Role.TUNED and tuned.speedup == pytest.approx(4.0)
    assert held.speedup is None  # a held-out workload the best kernel fails on: no mean
    only_c = group_figures(workload_figures(RunWorkloads(("a",), ("c",)), {}, baseline, best))
    assert only_c[1].speedup == pytest.approx(1.0) and only_c[1].workloads == 1
    missing = workload_figures(RunWorkloads(("a",), ("c",)), {}, baseline, {"a": best["a"]})
    assert missing[1].best_status == "" and group_figures(missing)[1].best_pct is None


def test_a_role_is_a_workload_role_written_as_before():
    figures = workload_figures(RunWorkloads(("a",), ("b",)), {}, {"a": ev("a", 2e-3)}, {})
    assert [type(r.role) for r in figures] == [Role, Role]
    assert [r.role for r in figures] == ["tuned", "held out"]
    assert [g.role for g in group_figures(figures)] == [Role.TUNED, Role.HELD_OUT]
