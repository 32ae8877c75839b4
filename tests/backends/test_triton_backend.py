"""The triton backend in Triton's CPU interpreter (TRITON_INTERPRET=1): kernels are built,
guarded and checked in isolated workers exactly as on a GPU; only timing needs the GPU."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from accelopt.backends import Kernel, Status, get_backend
from accelopt.backends.registry import shipped_kernel
from accelopt.errors import UserError
from accelopt.hardware.datasheet import H200
from accelopt.hardware.gpu_spec import INTERPRETER
from accelopt.problems.loader import load_problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.parent.evaluator import Evaluator

KERNELS = Path(__file__).parent / "triton_kernels"
SILU = load_problem("silu")


@pytest.fixture(scope="module")
def evaluator(accelopt_cache: Path) -> Iterator[Evaluator]:
    config = EvalConfig(check_only=True, seeds=2, workers=2, call_timeout_floor_s=5.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        with Evaluator(INTERPRETER, config) as ev:
            yield ev


def evaluate(evaluator: Evaluator, source: str, name: str = "kernel") -> Evaluation:
    return evaluator.evaluate(Kernel(source, "triton", name), SILU, "tiny")


def kernel_file(name: str) -> str:
    return (KERNELS / f"{name}.py").read_text()


def test_the_shipped_baseline_passes(evaluator: Evaluator) -> None:
    source = shipped_kernel(SILU, "baseline", "triton").read_text()
    result = evaluate(evaluator, source, "baseline")
    assert result.status is Status.PASSED, result.error
    assert result.max_rel_err is not None and result.max_rel_err < SILU.tolerance
    assert result.latency_s is None  # check-only: nothing timed
    assert result.compile_s is not None and result.compile_s > 0  # the first launch


@pytest.mark.parametrize(
    ("name", "status", "fragment"),
    [
        ("torch_op", Status.REJECTED, "aten.mul"),
        ("caught_guard", Status.REJECTED, "outside its Triton kernels"),
        ("writes_nothing", Status.INCORRECT, "was not written"),
        ("skips_tail", Status.INCORRECT, "5 of 2400 values NaN"),
        ("writes_past_the_end", Status.INCORRECT, "16 floats past the end of output 'y'"),
        ("modifies_input", Status.INCORRECT, "modified input 'x'"),
        ("remembers", Status.INCORRECT, "not written"),
        ("raises_first", Status.COMPILE_ERROR, "ValueError: boom"),
        ("raises_later", Status.CRASH, "second call"),
        ("hangs_later", Status.TIMEOUT, "deadline"),
        ("bad_block", Status.COMPILE_ERROR, "power of 2"),
        ("no_launcher", Status.COMPILE_ERROR, "no function named `kernel`"),
        ("imports_os", Status.REJECTED, "import of 'os'"),
    ],
)
def test_a_bad_kernel_is_data_with_a_status(
    evaluator: Evaluator, name: str, status: Status, fragment: str
) -> None:
    result = evaluate(evaluator, kernel_file(name), name)
    assert result.status is status, result.error
    assert fragment in result.error


def test_an_error_names_the_kernels_line(evaluator: Evaluator) -> None:
    result = evaluate(evaluator, kernel_file("raises_first"))
    assert "kernel.py line" in result.error


def test_a_syntax_error_is_a_build_error(evaluator: Evaluator) -> None:
    result = evaluate(evaluator, "def kernel(x, y:\n    pass\n")
    assert result.status is Status.COMPILE_ERROR
    assert "SyntaxError" in result.error


def test_what_the_launcher_prints_is_kept_in_the_log(evaluator: Evaluator) -> None:
    result = evaluate(evaluator, kernel_file("prints"))
    assert result.status is Status.PASSED, result.error
    assert "hello from the launcher" in result.log


def test_a_tf32_dot_is_refused_before_it_runs(evaluator: Evaluator) -> None:
    source = shipped_kernel(SILU, "baseline", "triton").read_text() + (
        "\n\n@triton.jit\ndef _mm(a, b):\n    return tl.dot(a, b)\n"
    )
    result = evaluate(evaluator, source)
    assert result.status is Status.REJECTED
    assert "input_precision" in result.error


def test_the_interpreter_refuses_to_time(accelopt_cache: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(UserError, match="--check-only"):
        Evaluator(INTERPRETER, EvalConfig())


def test_without_a_gpu_or_the_interpreter_the_backend_says_what_to_do(monkeypatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr("accelopt.hardware.gpu.list_gpus", lambda: [])
    with pytest.raises(UserError, match="TRITON_INTERPRET=1"):
        get_backend("triton").preflight(timing=False)


def test_facts_state_the_contract_and_the_gpu_ceilings() -> None:
    facts = get_backend("triton").facts(H200)
    text = facts.render()
    assert facts.language == "python"
    assert "def kernel(in0, ..., out0, ...)" in text
    assert 'input_precision="ieee"' in text
    assert "4,800.0 GB/s" in text and "SMs 132" in text
    assert any("torch dispatch guard" in rule for rule in facts.forbidden)


def test_python_comments_do_not_change_a_kernels_identity() -> None:
    source = kernel_file("prints")
    commented = source.replace("def kernel(x, y):", "# the launcher\ndef kernel(x, y):  # here")
    assert Kernel(source, "triton").hash == Kernel(commented, "triton").hash
    halved = "n = x.numel() // 2\n"
    assert Kernel(halved, "triton").hash != Kernel("n = x.numel() // 4\n", "triton").hash


GUARD_SCRIPT = """
import torch, triton, triton.language as tl
from accelopt.backends.triton.guard import TorchOpGuard

@triton.heuristics(values={"D": lambda a: a["o"].copy_(a["x"] * 2) is None})
@triton.jit
def _noop(x, o, D: tl.constexpr):
    pass

x, o = torch.arange(4.0), torch.zeros(4)
guard = TorchOpGuard()
try:
    with guard:
        _noop[(1,)](x, o)
except Exception:
    pass
print(sorted(set(guard.refused)))
"""


def test_the_guard_refuses_torch_work_in_a_heuristic_that_triton_calls(tmp_path: Path) -> None:
    """The static checks refuse this too; the guard must not rely on them: Triton calls the
    heuristic, but the operator is made by the kernel's own lambda."""
    import os
    import subprocess
    import sys

    script = tmp_path / "guard.py"
    script.write_text(GUARD_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "aten.mul.Tensor" in done.stdout


KNOBS_SCRIPT = """
import os
from triton import knobs
from accelopt.backends.triton.warmup import configure

configure(os.environ["SCRATCH"])
set_here = sorted(k for k in ("TRITON_CACHE_DIR", "TRITON_F32_DEFAULT") if k in os.environ)
print(knobs.cache.dir, knobs.language.fp32_default, knobs.propagate_env, set_here)
"""


def test_the_kernels_process_sets_tritons_knobs_and_leaves_the_environment_alone(
    tmp_path: Path,
) -> None:
    """The compile cache (the evaluation's own scratch folder: no kernel leaves a compiled file
    for another) and the fp32 default of a tl.dot are Triton's knobs, set in the kernel's
    process; its environment stays as it was."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env |= {"TRITON_INTERPRET": "1", "SCRATCH": str(tmp_path)}
    script = tmp_path / "knobs.py"
    script.write_text(KNOBS_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120,
        check=True,
    )  # fmt: skip
    assert done.stdout.strip().split(maxsplit=3) == [str(tmp_path), "ieee", "True", "[]"]
