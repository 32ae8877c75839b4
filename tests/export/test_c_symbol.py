"""The C symbol of an export is its own (``<problem>_<hash>``), so two exports link into one C
program: here two exports of silu (two kernels, one with a static helper: what two runs give),
built as the README says and as the objects in build/, called by one program; and the Python
runtime still loads each, at its exported sizes and at new ones (issue 46, defect 17)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

from accelopt.errors import UserError
from accelopt.export.bundle import c_symbol
from accelopt.export.loading import load
from accelopt.problems.loader import load_problem

from .test_runtime import SILU, silu, x_of

# Another silu kernel, with a static helper and the name `kernel` in a string and a comment
# (the rename is the preprocessor's: it renames the identifier, nothing else).
HELPED = """
#include <math.h>
static const char *name = "kernel";  /* kernel stays kernel in here */
static float one(float v) { return v / (1.0f + expf(-v)); }
void kernel(const float *x, float *y) {
    (void)name;
    for (long i = 0; i < (long)M * N; i++) y[i] = one(x[i]);
}
"""

PROGRAM = """#include <math.h>
#include <stdio.h>
#include "first/kernel.h"
#include "second/kernel.h"
int main(void) {
    static float x[SILU_TINY_M * SILU_TINY_N], a[SILU_TINY_M * SILU_TINY_N],
                 b[SILU_TINY_M * SILU_TINY_N];
    for (int i = 0; i < SILU_TINY_M * SILU_TINY_N; i++) x[i] = (float)(i % 13) - 6.0f;
    FIRST(x, a);
    SECOND(x, b);
    double worst = 0;
    for (int i = 0; i < SILU_TINY_M * SILU_TINY_N; i++) {
        double want = x[i] / (1.0 + exp(-(double)x[i]));
        worst = fmax(worst, fmax(fabs(a[i] - want), fabs(b[i] - want)));
    }
    printf("%s %s %.1e\\n", "FIRST", "SECOND", worst);
    return worst < 1e-5 ? 0 : 1;
}
"""


def _symbol(folder: Path) -> str:
    return json.loads((folder / "manifest.json").read_text())["symbol"]


def _readme_command(folder: Path) -> list[str]:
    """The README's command that builds kernel.c for the first workload's sizes."""
    line = next(
        ln for ln in (folder / "README.md").read_text().splitlines() if ln.startswith("cc ")
    )
    return shlex.split(line)


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{shlex.join(command)}\n{done.stdout}{done.stderr}"
    return done


def test_two_exports_link_into_one_c_program_and_load_in_python(export_with, tmp_path) -> None:
    problem = load_problem("silu")
    first = export_with(problem, SILU, ["tiny"], name="first").folder
    second = export_with(problem, HELPED, ["tiny"], name="second").folder
    symbols = [_symbol(first), _symbol(second)]
    assert all(re.fullmatch(r"silu_[0-9a-f]{12}", s) for s in symbols) and len(set(symbols)) == 2
    for folder, symbol in zip((first, second), symbols, strict=True):
        assert "kernel(" not in (folder / "kernel.h").read_text()
        assert f"-Dkernel={symbol}" in (folder / "README.md").read_text()
    program = PROGRAM.replace("FIRST", symbols[0]).replace("SECOND", symbols[1])
    (tmp_path / "app.c").write_text(program)
    # as objects built from kernel.c by the README's command, linked into one program
    objects = []
    for folder, symbol in zip((first, second), symbols, strict=True):
        _run(_readme_command(folder), folder)
        objects.append(str(folder / f"{symbol}.o"))
    link = ["cc", "-O2", "-fopenmp", f"-I{tmp_path}", "app.c", *objects, "-o", "app", "-lm"]
    _run(link, tmp_path)
    assert _run(["./app"], tmp_path).stdout.startswith(f"{symbols[0]} {symbols[1]} ")
    # as the shared objects the export built (each exports its own symbol, not `kernel`)
    shared = [str(first / "build" / "tiny.so"), str(second / "build" / "tiny.so")]
    _run(["cc", "-O2", f"-I{tmp_path}", "app.c", *shared, "-o", "app_so", "-lm"], tmp_path)
    _run(["./app_so"], tmp_path)
    # and Python loads each, in one process, at the exported sizes and at new ones (built here)
    for folder in (first, second):
        module = load(folder)
        for shape in [(24, 100), (5, 7)]:
            np.testing.assert_allclose(module.silu(x_of(shape)), silu(x_of(shape)), rtol=1e-5)


def test_the_symbol_is_a_c_identifier() -> None:
    assert c_symbol("matmul", "ef639af5b277" + "0" * 52) == "matmul_ef639af5b277"
    assert c_symbol("2d-conv.v2", "abcdef0123456789") == "p2d_conv_v2_abcdef012345"


def test_a_kernel_that_defines_the_macro_kernel_is_refused(export_with) -> None:
    renaming = "#define kernel my_silu\n" + SILU
    with pytest.raises(UserError, match="defines or undefines a macro named kernel"):
        export_with(load_problem("silu"), renaming, ["tiny"])
