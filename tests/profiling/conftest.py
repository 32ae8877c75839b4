"""Shared by the profiling tests: a private cache the worker processes inherit, fixed ceilings (no
test measures the machine), the kernels under kernels/, the silu problem, and an Evaluator made
with the test module's own ``CONFIG``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accelopt.backends.kernel import Kernel
from accelopt.hardware.spec import HardwareSpec
from accelopt.problems import Problem, load_problem
from accelopt.profiling.parent.evaluator import Evaluator

KERNELS_DIR = Path(__file__).parent / "kernels"
# support/fakes.py, importable as `fakes` (not this folder: its conftest would shadow others')
sys.path.insert(0, str(Path(__file__).parent / "support"))

_UNSHARE_PROBE = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000
ok = libc.unshare(CLONE_NEWNET) == 0 or libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0
sys.exit(0 if ok else 1)
"""


@pytest.fixture(scope="session")
def kernel_file() -> Callable[[str], Kernel]:
    """``kernel_file("segfault")``: the kernel in kernels/segfault.c, labelled with its name."""

    def load(name: str) -> Kernel:
        return Kernel((KERNELS_DIR / f"{name}.c").read_text(), "cpu", name)

    return load


@pytest.fixture(scope="session")
def unshare_permitted() -> bool:
    """Whether a fresh process may enter a new network namespace (directly or in a user one)."""
    probe = subprocess.run([sys.executable, "-c", _UNSHARE_PROBE], timeout=30, check=False)
    return probe.returncode == 0


@pytest.fixture(scope="module")
def silu() -> Problem:
    return load_problem("silu")


@pytest.fixture(scope="module")
def evaluator(
    request: pytest.FixtureRequest, accelopt_cache: Path, hw: HardwareSpec
) -> Iterator[Evaluator]:
    """One Evaluator per test module, on the fixed test ceilings, with the module's ``CONFIG``
    (a module that needs more, an environment variable or other ceilings, defines its own)."""
    with Evaluator(hw, request.module.CONFIG) as ev:
        yield ev
