"""The evaluation cache key's harness part changes by itself when the harness changes."""

from __future__ import annotations

import shutil
from pathlib import Path

from accelopt.profiling.config import HARNESS_PARTS, HARNESS_VERSION, PACKAGE, harness_digest


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "accelopt"
    for part in HARNESS_PARTS:
        shutil.copytree(PACKAGE / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_the_installed_harness_has_a_version():
    assert len(HARNESS_VERSION) == 16 and harness_digest() == HARNESS_VERSION


def test_the_same_sources_give_the_same_version(tmp_path):
    assert harness_digest(_copy(tmp_path)) == HARNESS_VERSION


def test_any_change_to_the_timing_code_changes_it(tmp_path):
    root = _copy(tmp_path)
    timing = root / "profiling" / "worker" / "timed_loop.py"
    timing.write_text(timing.read_text() + "\n# a change\n")
    assert harness_digest(root) != HARNESS_VERSION


def test_a_change_to_a_shipped_kernel_or_a_reference_changes_it(tmp_path):
    root = _copy(tmp_path)
    before = harness_digest(root)
    (root / "problems" / "suite" / "silu" / "baseline.c").write_text("/* another */\n")
    after_kernel = harness_digest(root)
    problem = root / "problems" / "suite" / "matmul" / "problem.py"
    problem.write_text(problem.read_text() + "\n")
    assert len({before, after_kernel, harness_digest(root)}) == 3


def test_compiled_python_does_not_count(tmp_path):
    root = _copy(tmp_path)
    cache = root / "profiling" / "__pycache__"
    cache.mkdir()
    (cache / "run.cpython-311.py").write_text("x = 1\n")
    assert harness_digest(root) == HARNESS_VERSION
