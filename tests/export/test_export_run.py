"""``export --run``: the run's own evaluations are the evidence where they were made on this CPU;
a run recorded on another CPU (its objects would be built here, untested) is evaluated here; a
workload that fails while the others were never measured is refused in one sentence."""

from __future__ import annotations

from pathlib import Path

import pytest
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.cli import export as export_cli
from accelopt.errors import UserError
from accelopt.problems.loader import load_problem
from accelopt.store.records import KernelRecord, RunRecord
from accelopt.store.store import Store

from .conftest import evaluation
from .test_runtime import SILU

HERE = make_spec(name="cpu:here")


def recorded_run(ws: Path, hardware: str) -> str:
    """A finished silu run on small and tiny whose best (the SILU kernel) passed on small."""
    problem, kernel = load_problem("silu"), Kernel(SILU, "cpu", "best")
    config = {"search": {"iterations": 1}, "workloads": ["small", "tiny"]}
    with Store.open(ws) as store:
        store.create_run(RunRecord("run1", "silu", "small", "cpu", hardware, "beam", config))
        store.add_kernel("run1", KernelRecord(kernel.hash, SILU, "cpu", 0, "baseline"))
        found = evaluation(problem, "small", kernel).model_copy(update={"hardware": hardware})
        store.put_evaluation(found)
        store.update_run("run1", status="finished", best_hash=kernel.hash)
    return "run1"


@pytest.fixture
def evaluated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The workloads export evaluates now (faked: tiny fails, the rest pass)."""
    seen: list[str] = []

    def evaluate(problem, kernel, workloads):
        seen.extend(workloads)
        status = {w: Status.INCORRECT if w == "tiny" else Status.PASSED for w in workloads}
        return {w: evaluation(problem, w, kernel, status[w], "wrong") for w in workloads[:1]}

    monkeypatch.setattr(export_cli, "_evaluate", evaluate)
    monkeypatch.setattr(export_cli.common, "hardware_for", lambda *a, **k: HERE)
    return seen


def test_the_runs_own_evidence_is_kept_where_it_was_measured_here(tmp_path, evaluated) -> None:
    run = recorded_run(tmp_path / "ws", HERE.key())
    done = export_cli.export_run("silu", run, tmp_path / "out", ["small"], tmp_path / "ws")
    assert evaluated == [] and done.workloads == ("small",)


def test_a_run_recorded_on_another_cpu_is_evaluated_here(tmp_path, evaluated) -> None:
    run = recorded_run(tmp_path / "ws", "cpu:elsewhere-0123456789ab")
    export_cli.export_run("silu", run, tmp_path / "out", ["small"], tmp_path / "ws")
    assert evaluated == ["small"]


def test_a_failure_before_unmeasured_workloads_is_one_sentence(tmp_path, evaluated) -> None:
    run = recorded_run(tmp_path / "ws", "cpu:elsewhere-0123456789ab")
    with pytest.raises(UserError, match="not exported: the kernel did not pass on silu/tiny"):
        export_cli.export_run("silu", run, tmp_path / "out", ["tiny", "small"], tmp_path / "ws")
    assert not (tmp_path / "out").exists()
