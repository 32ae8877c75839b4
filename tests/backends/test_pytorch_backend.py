"""The ``torch`` and ``inductor`` kinds: a problem's PyTorch form, timed in the isolated worker as
every kernel is, and the columns a suite table gives them (the best reference, the expert's time
over it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")

from fakes_bench import evaluation_of

from accelopt.backends.pytorch.backend import form_kernel, not_compiled
from accelopt.backends.status import Status
from accelopt.cli.output import best_reference
from accelopt.cli.torch_notes import form_notes, uncompiled_notes
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.parent.evaluator import Evaluator

SILU, MAMBA = load_problem("silu"), load_problem("mamba")


@pytest.fixture(scope="module")
def evaluator(accelopt_cache: Path, hw: HardwareSpec) -> Iterator[Evaluator]:
    config = EvalConfig(seeds=2, workers=1, min_calls=5, min_time_s=0.02)
    with Evaluator(hw, config) as ev:
        yield ev


def test_the_eager_form_passes_and_is_timed_as_any_kernel(evaluator: Evaluator) -> None:
    kernel = form_kernel(SILU, "torch")
    assert kernel is not None and kernel.backend == "torch"
    result = evaluator.evaluate(kernel, SILU, "small")
    assert result.status is Status.PASSED, result.error
    assert result.latency_s is not None and (result.rotation_sets or 0) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["inductor", "max-autotune"])
def test_the_compiled_form_is_compiled_before_timing(evaluator: Evaluator, kind: str) -> None:
    kernel = form_kernel(SILU, kind)
    assert kernel is not None and kernel.backend == kind
    result = evaluator.evaluate(kernel, SILU, "small")
    assert result.status is Status.PASSED, result.error
    assert result.compile_s is not None and result.latency_s is not None


def test_a_form_that_torch_compile_cannot_take_in_time_has_no_inductor_kernel() -> None:
    assert form_kernel(MAMBA, "inductor") is None and form_kernel(MAMBA, "torch") is not None
    assert "unrolls" in not_compiled(form_kernel(MAMBA, "torch").source)
    assert form_kernel(MAMBA, "max-autotune") is None
    why = not_compiled(form_kernel(MAMBA, "torch").source)
    kinds = ("torch", "inductor", "max-autotune")
    assert uncompiled_notes([SILU, MAMBA], kinds) == [
        f"inductor and max-autotune: no mamba figure: {why}"
    ]
    assert uncompiled_notes([SILU, MAMBA], ("torch",)) == []


def test_without_torch_the_columns_are_absent_and_one_line_says_why(monkeypatch) -> None:
    monkeypatch.setattr("accelopt.backends.pytorch.backend.torch_available", lambda: False)
    monkeypatch.setattr("accelopt.cli.torch_notes.torch_available", lambda: False)
    assert form_kernel(SILU, "torch") is None
    [line] = form_notes(("baseline", "numpy"), [], 2, "cpu", "all")
    assert "torch is not installed" in line


def test_the_best_reference_is_the_fastest_that_passed(hw: HardwareSpec) -> None:
    found = {
        ("silu", "numpy"): evaluation_of(SILU, "numpy", hw, 3e-3),
        ("silu", "torch"): evaluation_of(SILU, "torch", hw, 1e-3, Status.INCORRECT),
        ("silu", "inductor"): evaluation_of(SILU, "inductor", hw, 2e-3),
    }
    best = best_reference(found, "silu")
    assert best is not None and best.kernel == "inductor"
    assert best_reference({}, "silu") is None


def test_the_suite_table_shows_the_best_reference_and_the_experts_speedup_over_it(
    hw: HardwareSpec,
) -> None:
    from rich.console import Console

    from accelopt.cli.output import suite_table

    found = [evaluation_of(SILU, kind, hw, ms * 1e-3) for kind, ms in
             (("baseline", 8.0), ("expert", 1.0), ("numpy", 10.0), ("torch", 2.0))]  # fmt: skip
    table = suite_table([SILU], ("baseline", "expert", "numpy", "torch", "inductor"), found, "t")
    console = Console(width=250, record=True)
    console.print(table)
    text = console.export_text()
    assert "torch 2.000" in text and "2.00x" in text  # the expert's speedup over the fastest
    assert "()" not in text  # no inductor figure: an empty cell


KERNELBENCH = Path(__file__).parents[1] / "problems" / "kernelbench_files"


@pytest.mark.slow
def test_an_imported_kernelbench_problems_own_model_is_its_torch_kind(run_cli, tmp_path) -> None:
    import json

    # BatchNorm in training mode updates its running statistics in place: they are kernel
    # inputs here, and a form that wrote them would fail the harness's input check
    ws = tmp_path / "ws"
    added = run_cli("problem", "import", "kernelbench", KERNELBENCH / "8_BatchNorm.py",
                    "--workspace", ws)  # fmt: skip
    assert added.returncode == 0, added.stderr
    out = run_cli("bench", "run", "--problem", "kb_8_batchnorm", "--kernel", "all",
                  "--workspace", ws, "--min-calls", "3", "--min-time", "0.01", "--seeds", "2",
                  "--json", "-")  # fmt: skip
    assert out.returncode == 0, out.stderr
    records = {r["kernel"]: r for r in json.loads(out.stdout)}
    for kind in ("torch", "inductor"):
        assert records[kind]["status"] == "PASSED", records[kind]["error"]
    assert records["inductor"]["compile_s"] is not None


def test_the_form_of_a_kernelbench_model_passes_its_parameters_without_copies(
    tmp_path: Path,
) -> None:
    import numpy as np
    import torch

    from accelopt.problems.kernelbench import import_file
    from accelopt.problems.kernelbench.torch_form import ModelForm

    problem = import_file(KERNELBENCH / "5_LayerNorm.py", tmp_path).problem
    arrays = [a.copy() for a in problem.generate(problem.workload("cpu").sizes, 1)]
    form = ModelForm(problem.directory, lambda f: f)
    (out,) = form(*(torch.from_numpy(a) for a in arrays))
    (ref,) = problem.reference(*arrays)
    assert np.allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)
    weight = arrays[1].copy()
    arrays[1][...] = 0  # the model reads the buffer itself: the output follows it
    (zeroed,) = form(*(torch.from_numpy(a) for a in arrays))
    assert not np.allclose(zeroed.numpy(), out.numpy()) and weight.any()


def test_a_speedup_over_the_best_reference_names_the_reference() -> None:
    from accelopt.cli.output import versus_reference

    assert versus_reference("inductor", 1.25) == "1.25x (inductor)"
    assert versus_reference(None, 1.25) == versus_reference("numpy", None) == "—"
