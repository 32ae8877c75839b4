"""PyTorch: the module as a torch.library custom op that torch.compile treats as opaque, and a
KernelBench problem's model_new.py (ModelNew matches Model on get_inputs()). Triton: the exported
module validates and routes the same way (in Triton's CPU interpreter here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.problems.kernelbench import import_file
from accelopt.problems.loader import load_problem

from .conftest import fresh_python
from .test_runtime import SILU

pytest.importorskip("torch")
FILES = Path(__file__).parents[1] / "problems" / "kernelbench_files"

LAYER_NORM = """
#include <math.h>
/* out = (x - mean) / sqrt(var + 1e-5) * w + b over each batch row of features*dim1*dim2 */
void kernel(const float *x, const float *w, const float *b, float *out) {
    const long n = (long)features * dim1 * dim2;
    for (long r = 0; r < batch_size; r++) {
        const float *xr = x + r * n;
        double s = 0.0, ss = 0.0;
        for (long i = 0; i < n; i++) s += xr[i];
        const double mean = s / n;
        for (long i = 0; i < n; i++) ss += (xr[i] - mean) * (xr[i] - mean);
        const float inv = (float)(1.0 / sqrt(ss / n + 1e-5));
        for (long i = 0; i < n; i++) out[r * n + i] = ((float)(xr[i] - mean)) * inv * w[i] + b[i];
    }
}
"""


def test_torch_op_and_torch_compile(export_with, tmp_path) -> None:
    exported = export_with(load_problem("silu"), SILU, ["tiny"])
    op_name = f"silu_{Kernel(SILU).hash[:12]}"
    code = f"""
import sys, torch
sys.path.insert(0, {str(exported.folder)!r})
import silu_kernel
op = silu_kernel.torch_op()
assert op is torch.ops.accelopt_export.{op_name}
x = torch.randn(24, 100)
want = torch.nn.functional.silu(x)
assert torch.allclose(op(x), want, rtol=1e-5, atol=1e-6)
assert torch.allclose(silu_kernel.silu(x), want, rtol=1e-5, atol=1e-6)
model = torch.compile(lambda t: op(t) * 2.0, fullgraph=True)
assert torch.allclose(model(x), 2 * want, rtol=1e-5, atol=1e-6)
a = torch.randn(24, 100, requires_grad=True)  # a gradient is refused, never silently dropped
try:
    op(a).sum().backward()
except RuntimeError as exc:
    assert "has no backward" in str(exc) and a.grad is None, exc
else:
    raise AssertionError(f"backward went through, a.grad = {{a.grad}}")
print("ok")
"""
    done = fresh_python(code, tmp_path, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_model_new_matches_model_on_get_inputs(export_with, tmp_path) -> None:
    problem = import_file(FILES / "5_LayerNorm.py", tmp_path / "ws").problem
    exported = export_with(problem, LAYER_NORM, ["cpu"])
    assert exported.model_new and not exported.reference
    code = f"""
import sys, torch
sys.path.insert(0, {str(exported.folder)!r})
from model_new import Model, ModelNew, get_inputs, get_init_inputs
torch.manual_seed(0)
model = Model(*get_init_inputs())
new = ModelNew(*get_init_inputs())
with torch.no_grad():  # parameters off their init, so that a kernel ignoring them would fail
    for p in model.parameters():
        p.add_(0.1 * torch.randn_like(p))
new.load_state_dict(model.state_dict())
x, = get_inputs()
with torch.no_grad():
    want = model(x)
    got = new(x)
err = ((got.double() - want.double()).norm() / want.double().norm()).item()
assert got.shape == want.shape and err < 1e-5, err
print("ok", err)
"""
    done = fresh_python(code, tmp_path, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stderr[-2000:]


def test_triton_export_validates_and_routes_in_the_interpreter(export_with, tmp_path) -> None:
    pytest.importorskip("triton")
    problem = load_problem("silu")
    source = shipped_kernel(problem, "baseline", "triton").read_text()
    exported = export_with(problem, source, ["tiny"], backend="triton")
    assert (exported.folder / "kernel_triton.py").is_file()
    assert not (exported.folder / "build").exists()
    code = f"""
import sys, numpy as np, torch
sys.path.insert(0, {str(exported.folder)!r})
from silu_kernel import silu
for shape in [(24, 100), (9, 13)]:
    x = torch.randn(*shape)
    assert torch.allclose(silu(x), torch.nn.functional.silu(x), rtol=1e-5, atol=1e-6)
y = silu(np.ones((24, 100), np.float32))
assert isinstance(y, np.ndarray) and abs(float(y[0, 0]) - 0.7310586) < 1e-6
for bad, message in [(torch.ones(24, 100, dtype=torch.float64), "dtype"),
                     (torch.ones(100, 24).t(), "not contiguous"),
                     (torch.ones(3, 4, 5), "expected 2 axes")]:
    try:
        silu(bad)
    except ValueError as exc:
        assert message in str(exc), exc
    else:
        raise AssertionError(message)
print("ok")
"""
    done = fresh_python(code, tmp_path, env={"TRITON_INTERPRET": "1"}, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
