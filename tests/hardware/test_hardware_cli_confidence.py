"""``accelopt hardware`` says how sure each measured ceiling is, in its table and its JSON (run in
this process on a fixed spec: nothing is measured, no sandbox probed)."""

import json

import pytest
from specs import make_spec

from accelopt.cli import hardware as cli_hardware
from accelopt.hardware.spec import Confidence
from accelopt.reports.hardware import ceilings

SPEC = make_spec(
    name="cpu:test",
    provisional=True,
    spread={"matmul_rate": 0.01, "vector_rate": 0.3, "bandwidth": 0.05},
    disagreement={"matmul_rate": 0.02, "vector_rate": 0.01, "bandwidth": 0.44},
    confidence={
        "matmul_rate": Confidence.SURE,
        "vector_rate": Confidence.UNSURE,
        "bandwidth": Confidence.UNSURE,
    },
    provenance={"bandwidth": "measured: the best of 3 rounds and a control over 4.6 s gave ..."},
)


def test_a_line_per_ceiling_says_how_sure_and_why():
    assert cli_hardware.confidence_lines(SPEC) == [
        "matmul_rate: sure, its rounds agree within 2% (a quiet machine's: within 5%)",
        "vector_rate: [bold yellow]unsure[/bold yellow], its repeats spread 30% "
        "(a quiet machine's: under 10%)",
        "bandwidth: [bold yellow]unsure[/bold yellow], its rounds differ by 44% "
        "(a quiet machine's: within 15%)",
    ]


def test_a_busy_machine_is_the_reason_when_the_rounds_agreed():
    busy = SPEC.model_copy(update={"spread": {}, "disagreement": {"bandwidth": 0.01}})
    (line,) = [line for line in cli_hardware.confidence_lines(busy) if line.startswith("bandw")]
    assert line.endswith("unsure[/bold yellow], the machine was busy (see load below)")


def test_a_spec_without_judgement_gets_no_lines():
    assert cli_hardware.confidence_lines(make_spec()) == []


@pytest.fixture
def shown(monkeypatch):
    monkeypatch.setattr(cli_hardware, "load_cpu_spec", lambda measure_if_missing: SPEC)
    monkeypatch.setattr(cli_hardware, "sandbox_facts", lambda: {"error": "not probed here"})


def test_the_table_shows_how_sure_each_ceiling_is(shown, capsys):
    cli_hardware.show_hardware(measure=False, json_path=None)
    out = capsys.readouterr().out
    assert "  how sure each ceiling is:\n    matmul_rate: sure, its rounds agree within 2%" in out
    assert "bandwidth: unsure, its rounds differ by 44%" in out
    assert "bandwidth: measured: the best of 3 rounds and a control" in out  # provenance kept


def test_the_json_has_how_sure_each_ceiling_is(shown, tmp_path):
    path = tmp_path / "hardware.json"
    cli_hardware.show_hardware(measure=False, json_path=str(path))
    (row,) = [r for r in json.loads(path.read_text()) if r["label"] == "this machine"]
    assert row["confidence"] == {
        "matmul_rate": "sure",
        "vector_rate": "unsure",
        "bandwidth": "unsure",
    }
    assert row["disagreement"]["bandwidth"] == 0.44


def test_the_report_ceilings_carry_their_confidence():
    rows = {c.name: c for c in ceilings(SPEC)}
    assert rows["bandwidth"].confidence == "unsure"
    assert rows["matmul rate"].confidence == "sure"
    assert rows["cores"].confidence == ""


def test_a_vector_rate_far_below_fma_is_why_it_is_unsure():
    doubt = "vector rate 1/7 of the FMA rate (on x86_64 a quiet machine gives 1/2 to 1)"
    spec = SPEC.model_copy(
        update={
            "arch": "x86_64",
            "isa": ("avx2", "fma"),
            "matmul_rate": 7e11,
            "vector_rate": 1e11,
            "spread": {},
            "disagreement": {},
            "doubts": (doubt,),
        }
    )
    (line,) = [line for line in cli_hardware.confidence_lines(spec) if line.startswith("vector")]
    assert line.endswith(f"inconsistent with the other FLOP rate: {doubt}")
    quality = cli_hardware.measurement_quality(spec)
    assert quality is not None and f"busy ({doubt}; repeats spread unknown)" in quality
    assert "accelopt hardware --measure[/bold] on a quiet machine" in quality
