"""Calling an exported matmul folder as a user would, from a fresh interpreter (used by the
export command's tests and by optimize --export's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CALLS = """
import sys
import numpy as np
sys.path.insert(0, {folder!r})
from matmul_kernel import matmul
import accelopt
assert accelopt.load({folder!r}).matmul.__doc__
rng = np.random.default_rng(0)
for m, n, k in [{sizes}, (37, 53, 29)]:  # the exported workload's shape, then a new one
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = matmul(a, b)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 2e-5
try:
    matmul(a.astype(np.float64), b)
except ValueError as exc:
    assert "float32" in str(exc)
else:
    raise AssertionError("a float64 array was taken")
try:
    matmul(a, b.T.copy())
except ValueError as exc:
    assert "shape" in str(exc)
else:
    raise AssertionError("a wrong shape was taken")
import torch
ta, tb = torch.from_numpy(a), torch.from_numpy(b)
out = matmul(ta, tb)
assert isinstance(out, torch.Tensor)
assert torch.allclose(out, ta @ tb, rtol=1e-4, atol=1e-4)
print("ok")
"""


def call_export(folder: Path, sizes: tuple[int, int, int]) -> None:
    """Import the exported folder in a fresh interpreter and call it as a user would."""
    done = subprocess.run(
        [sys.executable, "-c", CALLS.format(folder=str(folder), sizes=sizes)],
        capture_output=True, text=True, timeout=300, cwd=folder.parent,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
