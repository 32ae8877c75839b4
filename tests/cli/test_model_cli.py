"""``accelopt model profile`` and ``optimize`` from the command line, on a tiny block: where the
time goes, the swap, outputs checked against eager, the three-way timing, JSON and HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.timeout(300)

TINY = Path(__file__).parents[1] / "model" / "tiny_models.py"


def test_profile_says_where_the_time_goes_per_matched_problem(run_cli, tmp_path):
    out = tmp_path / "profile.json"
    done = run_cli("model", "profile", TINY, "--workspace", tmp_path / "ws", "--json", out)
    assert done.returncode == 0, done.stderr
    found = json.loads(out.read_text())
    parts = {s["label"]: s for s in found["before"]}
    assert {"swiglu-1", "matmul-2"} <= set(parts)
    assert parts["swiglu-1"]["problem"] == "swiglu"
    assert sum(s["share"] for s in found["before"]) == pytest.approx(1.0)
    assert found["inputs"] == [[2, 8, 32]]
    assert "USDT" not in done.stderr  # the profiler's own chatter is kept off the terminal


def test_optimize_checks_and_times_eager_inductor_and_accelopt(run_cli, tmp_path):
    out, page = tmp_path / "optimize.json", tmp_path / "report.html"
    done = run_cli("model", "optimize", TINY, "--workspace", tmp_path / "ws", "--no-tune",
                   "--budget", "2", "--json", out, "--html", page)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(out.read_text())
    assert found["check"]["passed"] is True and found["check"]["max_rel_err"] <= 1e-4
    assert [t["name"] for t in found["timings"]] == ["eager", "inductor", "accelopt"]
    assert {s["baseline"] for s in found["speedups"]} == {"eager", "inductor"}
    sites = {s["problem"]: s for s in found["sites"]}
    assert {"swiglu", "matmul"} <= set(sites)
    for site in (sites["swiglu"], sites["matmul"]):  # at these tiny sizes a kernel may lose
        assert site["kernel"] == "shipped expert"
        if site["status"] == "swapped":
            assert site["speedup"]["ratio"] > 0
        else:
            assert "slower than the subgraph" in site["reason"]
    assert "rest (Inductor)" in {s["label"] for s in found["after"]}
    html = page.read_text()
    assert "<svg" in html and "swiglu" in html and "Inductor" in html


def test_a_model_file_without_a_model_is_one_sentence(run_cli, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    done = run_cli("model", "profile", bad, "--workspace", tmp_path / "ws")
    assert done.returncode != 0
    assert "has no Model or get_inputs" in done.stderr and "Traceback" not in done.stderr


def test_a_model_class_and_its_inputs_may_come_from_a_module(run_cli, tmp_path):
    out = tmp_path / "profile.json"
    env = {"PYTHONPATH": str(TINY.parent)}
    target, inputs = "tiny_models:TinyBlock", "tiny_models:get_inputs"
    done = run_cli("model", "profile", target, "--inputs", inputs,
                   "--workspace", tmp_path / "ws", "--json", out, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["model"] == "tiny_models:TinyBlock"
