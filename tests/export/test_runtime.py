"""The runtime of an export folder: validation, routing by size, the policy for new sizes, the
first call's verification, objects built on another machine, and a read-only folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from accelopt.export.loading import load
from accelopt.export.runtime import ExportedKernel, aligned
from accelopt.problems.loader import load_problem

from .conftest import fresh_python

SILU = """
#include <math.h>
void kernel(const float *x, float *y) {
    for (long i = 0; i < (long)M * N; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}
"""
# Right at the exported tiny workload (24 x 100) only: it ignores the sizes it is built for.
FIXED = SILU.replace("(long)M * N", "2400L")


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-x))


def x_of(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return aligned(np.random.default_rng(seed).standard_normal(shape, dtype=np.float32))


def test_routes_to_the_exported_object_and_builds_new_sizes(export_with) -> None:
    exported = export_with(load_problem("silu"), SILU, ["tiny", "small"])
    module = load(exported.folder)
    for shape in [(24, 100), (64, 112), (7, 9)]:
        x = x_of(shape)
        np.testing.assert_allclose(module.silu(x), silu(x), rtol=1e-5)
    built = list((exported.folder / "build").glob("*.so"))
    assert sorted(p.name for p in built)[-2:] == ["small.so", "tiny.so"] and len(built) == 3


def test_the_first_call_at_new_sizes_is_checked_against_the_reference(export_with) -> None:
    module = load(export_with(load_problem("silu"), FIXED, ["tiny"]).folder)
    x = x_of((24, 100))
    np.testing.assert_allclose(module.silu(x), silu(x), rtol=1e-5)  # exported: trusted
    with pytest.raises(module.KernelMismatchError, match="differs from the reference"):
        module.silu(x_of((30, 100)))
    with pytest.raises(module.KernelMismatchError):  # refused again, never used unchecked
        module.silu(x_of((30, 100)))
    y = module.silu(x_of((30, 100)), policy="reference")
    np.testing.assert_allclose(y, silu(x_of((30, 100))), rtol=1e-6)


def test_policies_for_sizes_nobody_exported(export_with) -> None:
    module = load(export_with(load_problem("silu"), SILU, ["tiny"]).folder)
    module.set_policy("raise")
    with pytest.raises(ValueError, match=r"exported for tiny \(M=24, N=100\), not M=3, N=5"):
        module.silu(x_of((3, 5)))
    module.set_policy("reference")
    np.testing.assert_allclose(module.silu(x_of((3, 5))), silu(x_of((3, 5))), rtol=1e-6)
    assert [p.name for p in (Path(module.__file__).parent / "build").iterdir()] == ["tiny.so"]
    with pytest.raises(ValueError, match="policy must be one of"):
        module.set_policy("guess")


def test_clear_errors_for_what_the_kernel_cannot_take(export_with) -> None:
    module = load(export_with(load_problem("matmul"), MATMUL, ["tiny"]).folder)
    a, b = x_of((72, 40)), x_of((40, 100))
    cases = [
        ((a.astype(np.float64), b), "lhs has dtype float64; this kernel takes float32"),
        ((a, b[:39]), r"rhs has shape \(39, 100\): axis 0 is 39, but K = 40"),
        ((a[:, :20], b), "lhs is not C-contiguous"),
        ((a[None], b), r"lhs has shape \(1, 72, 40\); expected 2 axes \[M, K\]"),
        (([[1.0]], b), "lhs must be a NumPy array or a torch tensor"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            module.matmul(*args)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        module.matmul(a)
    raw = np.empty(72 * 100 + 1, np.float32)
    start = 1 if raw.ctypes.data % 64 == 0 else 0
    with pytest.raises(ValueError, match="not 64-byte aligned"):
        module.matmul(a, b, out=raw[start : start + 7200].reshape(72, 100))
    out = module.aligned_empty((72, 100))
    assert module.matmul(a, b, out=out) is out
    silu_module = load(export_with(load_problem("silu"), SILU, ["tiny"], name="silu").folder)
    x = x_of((24, 100))
    with pytest.raises(ValueError, match=r"out \(y\) overlaps x"):
        silu_module.silu(x, out=x)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_an_input_off_the_contract_alignment_is_copied_not_misread(export_with) -> None:
    module = load(export_with(load_problem("silu"), SILU, ["tiny"]).folder)
    raw = np.random.default_rng(1).standard_normal(2400 + 16, dtype=np.float32)
    offset = next(i for i in range(16) if (raw.ctypes.data + 4 * i) % 64)
    x = raw[offset : offset + 2400].reshape(24, 100)
    np.testing.assert_allclose(module.silu(x), silu(x), rtol=1e-5)


def test_an_object_built_on_another_machine_is_rebuilt_and_checked(export_with) -> None:
    exported = export_with(load_problem("silu"), FIXED, ["tiny"])
    manifest = json.loads((exported.folder / "manifest.json").read_text())
    (exported.folder / "manifest.json").write_text(json.dumps({**manifest, "machine": "elsewhere"}))
    kernel = ExportedKernel(exported.folder)
    x = x_of((24, 100))
    np.testing.assert_allclose(kernel(x), silu(x), rtol=1e-5)  # rebuilt here, and verified
    assert len(list((exported.folder / "build").glob("*.so"))) == 2


def test_a_folder_it_cannot_build_in_builds_in_the_users_cache(
    export_with, tmp_path, monkeypatch
) -> None:
    """build/ cannot be made (a file is in its way; a read-only folder is the same to the
    runtime, and a test run as root could still write one): new sizes build in the cache."""
    exported = export_with(load_problem("silu"), SILU, ["tiny"])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shutil.rmtree(exported.folder / "build")
    (exported.folder / "build").write_text("in the way")
    module = load(exported.folder)
    np.testing.assert_allclose(module.silu(x_of((5, 7))), silu(x_of((5, 7))), rtol=1e-5)
    assert len(list((tmp_path / "cache" / "accelopt-export").rglob("*.so"))) == 1


def test_the_folder_needs_nothing_of_accelopt(export_with, tmp_path) -> None:
    """A fresh interpreter where accelopt cannot be imported builds, verifies and calls it."""
    exported = export_with(load_problem("silu"), SILU, ["tiny"])
    code = f"""
import sys, numpy as np
sys.modules["accelopt"] = None
sys.path.insert(0, {str(exported.folder)!r})
from silu_kernel import silu
x = np.linspace(-3, 3, 35, dtype=np.float32).reshape(5, 7)
assert np.allclose(silu(x), x / (1 + np.exp(-x)), rtol=1e-5)
print("ok")
"""
    done = fresh_python(code, tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_an_old_torch_without_the_op_api_leaves_the_function_working(export_with, tmp_path):
    """torch imported before the module, but without torch.library's op API (torch < 2.4 has no
    register_fake): a warning, and the function still takes NumPy arrays."""
    exported = export_with(load_problem("silu"), SILU, ["tiny"])
    code = f"""
import sys, types, warnings, numpy as np
sys.modules["torch"] = types.SimpleNamespace(Tensor=type("Tensor", (), {{}}), library=None)
sys.path.insert(0, {str(exported.folder)!r})
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from silu_kernel import silu
assert any("custom op is not registered" in str(w.message) for w in caught), caught
x = np.linspace(-3, 3, 2400, dtype=np.float32).reshape(24, 100)
assert np.allclose(silu(x), x / (1 + np.exp(-x)), rtol=1e-5)
print("ok")
"""
    done = fresh_python(code, tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


MATMUL = """
void kernel(const float *lhs, const float *rhs, float *out) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++) s += lhs[i * K + k] * rhs[k * N + j];
            out[i * N + j] = s;
        }
}
"""
