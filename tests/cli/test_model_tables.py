"""The model commands' terminal tables, rendered to a recording console."""

from __future__ import annotations

import dataclasses

import pytest
from rich.console import Console

from accelopt.cli import model_tables
from accelopt.model.records import ModelResult, Share, Site, Speedup, Timed, Unmatched

HOSTILE = "[bold]<script>x</script>[/bold]"


def result(over_inductor: float = 1.1) -> ModelResult:
    return ModelResult(
        model="models/net.py",
        inputs=[[8, 512]],
        sites=[
            Site(
                "s0",
                "matmul",
                {"M": 8, "N": 512, "K": 512},
                "swapped",
                kernel="run 3fa2c1d0e9ab",
                speedup=Speedup("kernel", "subgraph", 2.0, 1.8, 2.2),
            ),
            Site("s1", "softmax", {"N": 512}, "kept", reason="needs gradients"),
        ],
        before=[
            Share("softmax", 2.0, 0.2, "s1", "softmax"),
            Share(f"linear {HOSTILE}", 6.0, 0.6, "s0", "matmul"),
            Share("aten.gelu", 1.0, 0.1),
            Share("aten.add", 1.0, 0.1),
        ],
        unmatched=[Unmatched("aten.gelu", 0.1, "describe a gelu problem")],
        timings=[
            Timed("eager", 10.0, 9.8, 10.3, 30),
            Timed("inductor", 8.0, 7.9, 8.2, 30),
            Timed("accelopt", 7.0, 6.9, 7.1, 30),
        ],
        speedups=[
            Speedup("accelopt", "eager", 1.43, 1.40, 1.46),
            Speedup("accelopt", "inductor", over_inductor, 1.08, 1.12),
        ],
        check={"max_abs_err": 3e-6, "tolerance": 1e-4, "passed": True},
        notes=["timed on CPU"],
    )


@pytest.fixture
def recorded(monkeypatch):
    console = Console(width=250, record=True, color_system=None)
    monkeypatch.setattr(model_tables, "console", console)
    return console


def test_profile_lists_parts_slowest_first_with_advice(recorded):
    model_tables.print_profile(result())
    text = recorded.export_text()
    header = next(line for line in text.splitlines() if "part" in line and "share" in line)
    assert [c in header for c in ("part", "problem", "ms", "share")] == [True] * 4
    assert text.index("linear") < text.index("softmax") < text.index("aten.gelu")
    assert "60.0%" in text and "6.000" in text
    assert "not matched: aten.gelu (10.0% of eager time): describe a gelu problem" in text
    assert HOSTILE in text
    assert "timed on CPU" in text


def test_optimized_tables_and_the_amdahl_sentence(recorded):
    model_tables.print_optimized(result(over_inductor=1.1))
    text = recorded.export_text()
    for column in (
        "model",
        "ms ± (95% CI)",
        "speedup of accelopt",
        "site",
        "problem",
        "sizes",
        "status",
        "kernel",
        "share",
        "kernel speedup",
    ):
        assert column in text
    assert "torch.compile (Inductor)" in text
    assert "1.43x (1.40-1.46)" in text and "1.10x (1.08-1.12)" in text
    assert "M=8, N=512, K=512" in text and "kept: needs gradients" in text
    assert "run 3fa2c1d0e9ab" in text and "2.00x (1.80-2.20)" in text
    assert "outputs against eager: max abs err 3.0e-06, tolerance 1.0e-04: passed" in text
    assert (
        "the kernels cover 60.0 % of eager time; even at zero time they could make the model at "
        "most 2.50x faster" in text.lower()
    )


def test_no_amdahl_sentence_when_accelopt_gains_enough(recorded):
    model_tables.print_optimized(result(over_inductor=1.3))
    assert "at most" not in recorded.export_text()


def test_amdahl_sentence_when_nothing_was_timed(recorded):
    r = dataclasses.replace(result(), speedups=[], sites=[])
    model_tables.print_optimized(r)
    text = recorded.export_text()
    assert "cover 0.0 % of eager time" in text and "at most 1.00x faster" in text
