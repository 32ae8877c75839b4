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
def test_the_compiled_form_is_compiled_before_timing(evaluator: Evaluator) -> None:
    kernel = form_kernel(SILU, "inductor")
    assert kernel is not None
    result = evaluator.evaluate(kernel, SILU, "small")
    assert result.status is Status.PASSED, result.error
    assert result.compile_s is not None and result.latency_s is not None


def test_a_form_that_torch_compile_cannot_take_in_time_has_no_inductor_kernel() -> None:
    assert form_kernel(MAMBA, "inductor") is None and form_kernel(MAMBA, "torch") is not None
    assert "unrolls" in not_compiled(form_kernel(MAMBA, "torch").source)
    assert uncompiled_notes([SILU, MAMBA]) == [
        f"inductor: no mamba column: {not_compiled(form_kernel(MAMBA, 'torch').source)}"
    ]


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


def test_the_suite_table_shows_the_best_reference_and_the_experts_time_over_it(
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
    assert "torch 2.000" in text and "0.50x" in text  # the expert over the fastest reference
    assert "()" not in text  # no inductor figure: an empty cell
