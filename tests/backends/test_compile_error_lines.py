"""A compile error's line numbers are the kernel source's own: "kernel.c:N" is line N of what the
model wrote (the prototype is force-included and the sizes are -D macros: nothing is prepended)."""

from __future__ import annotations

import re

import pytest

from accelopt.backends.cpu.compiler import (
    BuildInputs,
    compile_kernel,
    prototype,
    trim_compiler_output,
)
from accelopt.backends.status import Status

BROKEN = """\
// A kernel with a typo on line 9 (after comments, an include and blank lines).
#include <math.h>

/* y = 2 x */


void kernel(const float *x, float *y) {
    for (int i = 0; i < M; i++) {
        y[i] = 2 * x[i] + nope;
    }
}
"""


def line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


def build(cc, tmp_path, source: str, signature: str = prototype(1, 1)):
    (tmp_path / "work").mkdir(exist_ok=True)
    return compile_kernel(
        BuildInputs(source, {"M": 4}, signature, cc), tmp_path / "work", tmp_path / "c", 60
    )


def test_the_reported_line_is_the_sources_line(cc, tmp_path):
    built = build(cc, tmp_path, BROKEN)
    assert built.status is Status.COMPILE_ERROR
    first = next(line for line in built.error.splitlines() if "error" in line)
    assert line_of(BROKEN, "nope") == 9
    assert re.match(r"kernel\.c:9:\d+: error: .*nope", first), built.error
    assert "/accelopt-build-" not in built.error  # the build directory is not named


def test_a_conflict_with_the_prototype_points_at_the_kernels_line(cc, tmp_path):
    source = "\n\nvoid kernel(const float *x, float *y, int n) { y[0] = x[0] + n; }\n"
    built = build(cc, tmp_path, source)
    assert built.status is Status.COMPILE_ERROR
    assert re.search(r"^kernel\.c:3:\d+: error: conflicting types for", built.error, re.M)


def test_a_size_macro_error_names_the_kernels_line(cc, tmp_path):
    source = "void kernel(const float *x, float *y) { y[0] = x[0]; }\n\nint M = 3;\n"
    built = build(cc, tmp_path, source)
    assert built.status is Status.COMPILE_ERROR
    if "<command-line>" not in built.error:
        pytest.skip("this compiler names the macro's origin otherwise")
    assert "<command-line> (the sizes, -D macros): error:" in built.error
    assert re.search(r"kernel\.c:3:\d+: note: in expansion of macro .M.", built.error)


def test_trim_renames_the_prototype_header_and_the_command_line():
    output = (
        "/w/kernel.c:3:6: error: conflicting types for 'kernel'\n"
        "In file included from <command-line>:\n"
        "./accelopt_contract.h:1:6: note: previous declaration of 'kernel'\n"
        "<command-line>: error: expected identifier or '(' before numeric constant\n"
    )
    assert trim_compiler_output(output, "/w/kernel.c").splitlines() == [
        "kernel.c:3:6: error: conflicting types for 'kernel'",
        "In file included from <command-line> (the sizes, -D macros):",
        "accelopt_contract.h (the contract's prototype, force-included):1:6: note: previous "
        "declaration of 'kernel'",
        "<command-line> (the sizes, -D macros): error: expected identifier or '(' before numeric "
        "constant",
    ]
