"""`accelopt problem import kernelbench` as a user runs it: an imported LayerNorm shows its
arguments and counted costs, a correct C kernel passes, a wrong one and one that assumes the
module's initial parameters (weight 1, bias 0) do not; a refused file says why in one sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

FILES = Path(__file__).parents[1] / "problems" / "kernelbench_files"
pytestmark = pytest.mark.slow

LAYERNORM = """
#include <math.h>
#define ROW (features * dim1 * dim2)
void kernel(const float *x, const float *ln_weight, const float *ln_bias, float *out) {
#pragma omp parallel for
    for (int b = 0; b < batch_size; b++) {
        const float *xb = x + (long)b * ROW;
        double mean = 0, var = 0;
        for (int i = 0; i < ROW; i++) mean += xb[i];
        mean /= ROW;
        for (int i = 0; i < ROW; i++) var += (xb[i] - mean) * (xb[i] - mean);
        float inv = (float)(1.0 / sqrt(var / ROW + 1e-5));
        for (int i = 0; i < ROW; i++)
            out[(long)b * ROW + i] = (float)((xb[i] - mean) * inv) * WEIGHT + BIAS;
    }
}
"""


def kernel_file(tmp_path: Path, name: str, weight: str, bias: str) -> Path:
    path = tmp_path / f"{name}.c"
    path.write_text(LAYERNORM.replace("WEIGHT", weight).replace("BIAS", bias))
    return path


def test_import_show_and_evaluate_a_kernelbench_layernorm(run_cli, tmp_path):
    ws = tmp_path / "ws"
    imported = run_cli("problem", "import", "kernelbench", FILES / "5_LayerNorm.py",
                       "--set", "batch_size=8", "--workspace", ws, "--json", "-")  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    (row,) = json.loads(imported.stdout)
    assert row["status"] == "imported" and row["name"] == "kb_5_layernorm"
    assert row["workloads"]["cpu"]["batch_size"] == 8
    assert row["workloads"]["source"]["batch_size"] == 4
    shown = run_cli("bench", "show", "kb_5_layernorm", "--workspace", ws, "--json", "-")
    problem = json.loads(shown.stdout)
    assert [t["name"] for t in problem["inputs"]] == ["x", "ln_weight", "ln_bias"]
    assert problem["outputs"] == [
        {"name": "out", "shape": ["batch_size", "features", "dim1", "dim2"]}
    ]
    assert problem["origin"] == "workspace" and problem["requires"] == ["torch"]
    assert set(problem["cost_notes"]) == {"matmul_flops", "vector_flops", "bytes"}
    cpu = next(c for c in problem["costs"] if c["workload"] == "cpu")
    assert cpu["bytes"] == 4 * (2 * 8 * 8 * 16 * 16 + 2 * 8 * 16 * 16)
    table = run_cli("bench", "show", "kb_5_layernorm", "--workspace", ws)
    assert "ln_weight" in table.stdout and "[features, dim1, dim2]" in table.stdout

    def status(kernel: Path) -> str:
        out = run_cli("eval", "kb_5_layernorm", kernel, "--workspace", ws, "--check-only",
                      "--json", "-")  # fmt: skip
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["status"]

    good = kernel_file(tmp_path, "good", "ln_weight[i]", "ln_bias[i]")
    assert status(good) == "PASSED"
    assert status(kernel_file(tmp_path, "wrong", "ln_weight[i]", "ln_weight[i]")) == "INCORRECT"
    assert status(kernel_file(tmp_path, "initial", "1.0f", "0.0f")) == "INCORRECT"
    timed = run_cli("eval", "kb_5_layernorm", good, "--workspace", ws, "--min-calls", "5",
                    "--min-time", "0.01", "--json", "-")  # fmt: skip
    result = json.loads(timed.stdout)
    assert result["status"] == "PASSED" and result["pct_of_peak"] > 0


def test_a_refused_file_is_one_sentence_and_a_folder_import_is_a_table(run_cli, tmp_path):
    ws = tmp_path / "ws"
    bad = tmp_path / "99_Targets.py"
    bad.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x, t):\n        return x[t]\n\n\nn = 8\n\n\n"
        "def get_inputs():\n    return [torch.rand(n), torch.randint(0, n, (n,))]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    refused = run_cli("problem", "import", "kernelbench", bad, "--workspace", ws)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "is torch.int64; accelopt kernels take float32 tensors only" in refused.stderr
    folder = tmp_path / "level"
    folder.mkdir()
    for name in ("1_ReLU.py", "3_Softmax.py"):
        (folder / name).write_text((FILES / name).read_text())
    (folder / bad.name).write_text(bad.read_text())
    table = run_cli("problem", "import", "kernelbench", folder, "--workspace", ws)
    assert table.returncode == 0, table.stderr
    assert "2 of 3 imported" in table.stdout and "refused" in table.stdout
    listed = json.loads(run_cli("problem", "list", "--workspace", ws, "--json", "-").stdout)
    assert sorted(r["name"] for r in listed) == ["kb_1_relu", "kb_3_softmax"]
