"""``accelopt model optimize`` with an endpoint (the scripted server): a hot part no problem
matches is carved out as a KernelBench file, imported, searched by the agents, and its kernel is
then matched and swapped in; without an endpoint, one sentence says what it would add."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelopt.testing.scripted import RecordedRequest, Reply, ScriptedServer

pytest.importorskip("torch")
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

MODEL = """
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x)

def get_inputs():
    return [torch.randn(64, 96)]

def get_init_inputs():
    return []
"""
TANH = """#include <math.h>
void kernel(const float *in0, float *out) {
    for (int i = 0; i < D0 * D1; i++)
        out[i] = tanhf(in0[i]);
}
"""


def agents(request: RecordedRequest) -> Reply:
    if request.model == "planner":
        return Reply("TITLE: as written\nSTEPS:\n1. Keep the loop.\n")
    if request.model == "summarizer":
        return Reply("TITLE: tanhf\nLESSON: libm's tanhf is exact enough.\n")
    return Reply(f"```c\n{TANH}```\n")  # executor (the first kernel too) and fixer


def _config(path: Path, base_url: str) -> Path:
    agents_yaml = "".join(f"  {a}: {{model: {a}}}\n"
                          for a in ("planner", "executor", "fixer", "summarizer"))  # fmt: skip
    path.write_text(f"llm:\n  default: {{base_url: '{base_url}', model: m, max_retries: 0}}\n"
                    + agents_yaml)  # fmt: skip
    return path


def test_an_unmatched_hot_part_is_imported_searched_and_then_swapped(run_cli, tmp_path):
    model = tmp_path / "tanh_model.py"
    model.write_text(MODEL)
    out = tmp_path / "out.json"
    with ScriptedServer(default=agents) as server:
        config = _config(tmp_path / "accelopt.yaml", server.base_url)
        done = run_cli("model", "optimize", model, "--workspace", tmp_path / "ws", "--no-tune",
                       "--budget", "2", "--config", config, "--iterations", "1",
                       "--json", out)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(out.read_text())
    assert any("imported as model_tanh_" in n and "searched" in n for n in found["notes"])
    swapped = [s for s in found["sites"] if s["problem"].startswith("model_tanh_")]
    assert swapped and swapped[0]["kernel"].startswith("run ")
    if swapped[0]["status"] == "kept":  # a scalar tanhf may lose to torch's: said so
        assert "slower than the subgraph" in swapped[0]["reason"]
    assert found["check"]["passed"] is True
    assert (tmp_path / "ws" / "problems" / swapped[0]["problem"] / "model.py").is_file()
    # shipped kernels only: the searched kernel (an LLM's) never runs in the caller's process
    done = run_cli("model", "optimize", model, "--workspace", tmp_path / "ws", "--budget", "1",
                   "--kernels", "shipped", "--json", out)  # fmt: skip
    assert done.returncode == 0, done.stderr
    site = next(
        s for s in json.loads(out.read_text())["sites"] if s["problem"].startswith("model_")
    )
    assert site["status"] == "kept" and "has no kernel here" in site["reason"]


def test_without_an_endpoint_it_says_what_one_would_add(run_cli, tmp_path):
    model = tmp_path / "tanh_model.py"
    model.write_text(MODEL)
    out = tmp_path / "out.json"
    config = _config(tmp_path / "accelopt.yaml", "http://127.0.0.1:9/v1")  # nothing listens
    done = run_cli("model", "optimize", model, "--workspace", tmp_path / "ws", "--no-tune",
                   "--budget", "1", "--config", config, "--json", out)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(out.read_text())
    assert [u["label"] for u in found["unmatched"]] == ["tanh"]
    assert "imports it as a problem of its own" in found["unmatched"][0]["advice"]
    assert any("not imported and searched: cannot reach" in n for n in found["notes"])
