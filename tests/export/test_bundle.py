"""What an export folder holds: the standalone reference of every suite problem, the refusal of
a kernel that did not pass, EVIDENCE.json, the C header, and an earlier export replaced whole."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.export.bundle import Source, export_kernel, refusal
from accelopt.export.reference import standalone_reference
from accelopt.problems.loader import load_problem, suite_names

from .conftest import evaluation, fresh_python
from .test_runtime import SILU


@pytest.mark.parametrize("name", suite_names())
def test_every_suite_problem_has_a_standalone_reference(name: str, tmp_path: Path) -> None:
    problem = load_problem(name)
    text = standalone_reference(problem)
    assert text is not None and "accelopt" not in text.split("\n", 2)[2]
    (tmp_path / "reference.py").write_text(text)
    sizes = min((w.sizes for w in problem.workloads.values()), key=lambda s: sum(s.values()))
    arrays = problem.generate(sizes, seed=2)
    np.savez(tmp_path / "inputs.npz", *arrays)
    want = problem.reference(*arrays)
    code = (
        "import sys, numpy as np; sys.modules['accelopt'] = None\n"  # accelopt cannot be imported
        "import reference\n"
        "found = np.load('inputs.npz')\n"
        "arrays = [found[f'arr_{i}'] for i in range(len(found.files))]\n"
        "np.savez('out.npz', *reference.reference(*arrays))\n"
    )
    done = fresh_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    got = np.load(tmp_path / "out.npz")
    assert len(got.files) == len(want)
    assert all(np.array_equal(got[f"arr_{i}"], w) for i, w in enumerate(want))


def test_a_kernel_that_did_not_pass_everywhere_is_refused_in_one_sentence(tmp_path) -> None:
    problem = load_problem("silu")
    kernel = Kernel(SILU, "cpu", "k")
    found = {
        "tiny": evaluation(problem, "tiny", kernel),
        "small": evaluation(problem, "small", kernel, Status.INCORRECT, "relative error 0.4\nx"),
    }
    reason = refusal(problem, found)
    assert reason == (
        "the kernel did not pass on silu/small: it is INCORRECT (relative error 0.4); only a "
        "kernel that passed on every exported workload is exported"
    )
    with pytest.raises(UserError, match="did not pass on silu/small"):
        export_kernel(problem, Source(kernel), found, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.iterdir())


def test_evidence_header_and_replacing_an_export(export_with, tmp_path) -> None:
    problem = load_problem("silu")
    first = export_with(problem, SILU, ["tiny", "small"])
    evidence = json.loads((first.folder / "EVIDENCE.json").read_text())
    assert evidence["kernel_hash"] == Kernel(SILU, "cpu").hash
    assert evidence["workloads"]["small"]["status"] == "PASSED"
    assert evidence["workloads"]["small"]["sizes"] == {"M": 64, "N": 112}
    assert evidence["workloads"]["small"]["pct_of_peak"] == 0.5
    for key in ("hardware", "harness_version", "exported_at", "run", "accelopt_version"):
        assert key in evidence
    header = (first.folder / "kernel.h").read_text()
    symbol = json.loads((first.folder / "manifest.json").read_text())["symbol"]
    assert f"void {symbol}(const float *x, float *y);" in header and "kernel(" not in header
    assert "#define SILU_SMALL_M 64" in header
    program = tmp_path / "app.c"
    program.write_text(
        '#include "kernel.h"\n#include <stdio.h>\nint main(void) {\n'
        "  static float x[SILU_TINY_M * SILU_TINY_N], y[SILU_TINY_M * SILU_TINY_N];\n"
        f'  x[0] = 1.0f; {symbol}(x, y); printf("%.4f\\n", y[0]); return 0;\n}}\n'
    )
    built = subprocess.run(
        ["cc", "-O2", "-fopenmp", f"-I{first.folder}", str(program), "-DM=24", "-DN=100",
         f"-Dkernel={symbol}", str(first.folder / "kernel.c"), "-o", str(tmp_path / "app"),
         "-lm"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(tmp_path / "app")], capture_output=True, text=True)
    assert ran.stdout.strip() == "0.7311"
    again = export_with(problem, SILU, ["tiny"])
    assert sorted(p.name for p in (again.folder / "build").iterdir()) == ["tiny.so"]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="holds something other than an accelopt export"):
        export_with(problem, SILU, ["tiny"], name="mine")


def test_a_target_that_cannot_be_written_is_one_sentence(export_with, tmp_path) -> None:
    (tmp_path / "file").write_text("a file, not a folder")
    with pytest.raises(UserError, match=r"cannot write beside .* give --to a folder you can write"):
        export_with(load_problem("silu"), SILU, ["tiny"], name="file/inside")


def test_a_triton_kernel_todays_checks_refuse_is_not_exported_though_it_passed(tmp_path) -> None:
    """It passed under older checks (an evaluation in a cache, an imported run): what is
    exported runs in the caller's process, so today's checks decide."""
    pytest.importorskip("triton")
    problem = load_problem("silu")
    held_out = Path(__file__).parents[1] / "backends" / "triton_attacks" / "held_out.py"
    kernel = Kernel(held_out.read_text(), "triton", "held_out")
    found = {"tiny": evaluation(problem, "tiny", kernel)}
    with pytest.raises(UserError, match="its source is refused"):
        export_kernel(problem, Source(kernel), found, tmp_path / "out")
    assert not (tmp_path / "out").exists()
