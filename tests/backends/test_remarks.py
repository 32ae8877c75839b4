"""Vectorization remarks: GCC's report on a kernel, kept to one line per loop of kernel.c."""

from __future__ import annotations

import re

import pytest

from accelopt.backends.base import get_backend
from accelopt.backends.cpu import remarks as remarks_module
from accelopt.backends.cpu.compiler import BuildInputs, prototype
from accelopt.backends.cpu.remarks import vectorization_remarks
from accelopt.backends.registry import shipped_kernel
from accelopt.problems import load_problem

SIGNATURE = prototype(1, 1)
SIZES = {"N": 4096}


@pytest.fixture
def gcc(cc):
    if "clang" in cc.version.lower():
        pytest.skip("clang has no -fopt-info")
    return cc


def remarks(cc, source: str, **kwargs) -> list[str]:
    return vectorization_remarks(BuildInputs(source, SIZES, SIGNATURE, cc), **kwargs)


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def about_line(lines: list[str], number: int) -> list[str]:
    return [line for line in lines if line.startswith(f"kernel.c:{number}:")]


SIMPLE = """\
void kernel(const float *restrict x, float *restrict y) {
    for (int i = 0; i < N; i++)
        y[i] = 2.0f * x[i] + 1.0f;
}
"""


def test_a_simple_loop_is_reported_vectorized(gcc):
    lines = remarks(gcc, SIMPLE)
    loop = about_line(lines, 2)
    assert len(loop) == 1, lines
    assert "optimized: loop vectorized" in loop[0]
    assert loop[0].endswith("// for (int i = 0; i < N; i++)")
    assert all(line.startswith("kernel.c:") for line in lines)
    assert not any("/tmp" in line or "accelopt-remarks" in line for line in lines)


DEPENDENCE = """\
void kernel(const float *restrict x, float *restrict y) {
    y[0] = x[0];
    for (int i = 1; i < N; i++)
        y[i] = y[i - 1] * x[i];
}
"""

CALL = """\
float helper(float v);

void kernel(const float *restrict x, float *restrict y) {
    for (int i = 0; i < N; i++)
        y[i] = helper(x[i]);
}
"""


def test_a_loop_carried_dependence_is_reported_missed(gcc):
    lines = remarks(gcc, DEPENDENCE)
    loop = about_line(lines, line_of(DEPENDENCE, "for ("))
    assert len(loop) == 1, lines
    assert "missed: couldn't vectorize loop:" in loop[0]
    assert "optimized" not in "\n".join(lines)


def test_a_call_gcc_cannot_vectorize_is_reported_with_its_name(gcc):
    lines = remarks(gcc, CALL)
    loop = about_line(lines, line_of(CALL, "for ("))
    assert len(loop) == 1, lines
    assert "missed: couldn't vectorize loop" in loop[0]
    assert "helper()" in loop[0]
    assert len(lines) == len(set(lines))


OPENMP = """\
#include <math.h>

void kernel(const float *restrict x, float *restrict y) {
#pragma omp parallel for
    for (int i = 0; i < N; i++)
        y[i] = 3.0f * x[i] - 1.0f;
    float s = 0.0f;
#pragma omp parallel for reduction(+ : s)
    for (int i = 0; i < N; i++)
        s += x[i] * x[i];
    y[0] += s;
}
"""


def test_loops_in_openmp_regions_are_kept(gcc):
    lines = remarks(gcc, OPENMP)
    vectorized = [line for line in lines if "optimized: loop vectorized" in line]
    # GCC reports an outlined loop (kernel._omp_fn.N) at its `for` or its body line
    first = {line_of(OPENMP, "for ("), line_of(OPENMP, "3.0f")}
    second = {line_of(OPENMP, "for (") + 4, line_of(OPENMP, "s += x[i]")}
    numbers = {int(line.split(":")[1]) for line in vectorized}
    assert numbers & first and numbers & second, lines
    # the pragma lines carry only OpenMP's own code (reduction loops, argument structs)
    pragmas = {i for i, text in enumerate(OPENMP.splitlines(), 1) if "#pragma" in text}
    assert not {int(line.split(":")[1]) for line in lines} & pragmas
    assert not any("GOMP" in line or "omp_data" in line for line in lines)


def test_broken_code_gives_no_remarks(gcc):
    assert remarks(gcc, "void kernel(const float *x, float *y) { this is not C }\n") == []
    assert remarks(gcc, "void kernel(int wrong_signature) {}\n") == []


def test_a_compiler_timeout_gives_no_remarks(gcc):
    assert remarks(gcc, SIMPLE, timeout_s=1e-4) == []


MANY = (
    "void kernel(const float *restrict x, float *restrict y) {\n"
    + "".join(
        f"    for (int i = 0; i < N; i++) y[i] {op}= x[i] + {k}.0f;\n"
        for k, op in enumerate("+-*+-*", start=1)
    )
    + "}\n"
)


def test_remarks_are_ordered_by_line_and_capped(gcc):
    full = remarks(gcc, MANY)
    numbers = [int(line.split(":")[1]) for line in full]
    assert numbers == sorted(numbers) and len(numbers) == 6, full
    capped = remarks(gcc, MANY, max_lines=2)
    assert capped == [*full[:2], "(4 more)"]


def test_cpu_backend_remarks_check_the_source_first(gcc):
    backend = get_backend("cpu")
    silu = load_problem("silu")
    sizes = silu.workload("cpu").sizes
    rejected = '#include <stdio.h>\nvoid kernel(const float *x, float *y) { puts("hi"); }\n'
    assert backend.remarks(rejected, silu, sizes) == []
    baseline = backend.remarks(shipped_kernel(silu, "baseline").read_text(), silu, sizes)
    assert baseline and all(
        re.match(r"kernel\.c:\d+:\d+: (optimized|missed): ", r) for r in baseline
    )


def test_numpy_backend_has_no_remarks():
    matmul = load_problem("matmul")
    assert get_backend("numpy").remarks("def reference(): ...", matmul, {"M": 1}) == []


# GCC 12's report for a kernel with an OpenMP reduction, a call, a recurrence and nested loops
NEST = "loop nest containing two or more consecutive inner loops cannot be vectorized"
REPORT = f"""\
/tmp/x/kernel.c:10:27: missed: couldn't vectorize loop
/tmp/x/kernel.c:12:22: missed: not vectorized: complicated access pattern.
/tmp/x/kernel.c:11:31: optimized: loop vectorized using 64 byte vectors
/tmp/x/kernel.c:2:31: missed: couldn't vectorize loop
/tmp/x/kernel.c:2:31: missed: not vectorized: {NEST}
/tmp/x/kernel.c:17:35: missed: couldn't vectorize loop
/tmp/x/kernel.c:17:9: missed: not vectorized: number of iterations cannot be computed.
/tmp/x/kernel.c:19:15: optimized: loop vectorized using 64 byte vectors
/tmp/x/kernel.c:19:15: optimized: loop vectorized using 32 byte vectors
/tmp/x/kernel.c:17:9: missed: statement clobbers memory: _28 = __atomic_load_4 (_26, 0);
/tmp/x/kernel.c:7:26: missed: couldn't vectorize loop
/tmp/x/kernel.c:7:26: missed: not vectorized: multiple nested loops.
/tmp/x/kernel.c:8:23: missed: couldn't vectorize loop
/tmp/x/kernel.c:9:17: missed: statement clobbers memory: _63 = helper (_20);
/tmp/x/kernel.c:6:23: missed: couldn't vectorize loop
/tmp/x/kernel.c:6:17: missed: not vectorized: no vectype for stmt: _12 = *_11;
 scalar_type: float
/tmp/x/kernel.c:4:23: optimized: loop vectorized using 64 byte vectors
/tmp/x/kernel.c:4:23: optimized:  loop versioned for vectorization because of possible aliasing
/tmp/x/kernel.c:9:17: missed: statement clobbers memory: _63 = helper (_20);
/tmp/x/kernel.c:3:6: missed: statement clobbers memory: __builtin_GOMP_parallel (kernel._omp_fn.0);
/usr/lib/gcc/x86_64-linux-gnu/12/include/avx512fintrin.h:5:3: optimized: loop vectorized
/tmp/x/kernel.c:14:9: optimized: basic block part vectorized using 64 byte vectors
"""


def test_the_selection_on_a_recorded_report():
    """Kept: one line per loop. Dropped: OpenMP glue on pragma lines, epilogue duplicates, SLP
    notes about calls, other files, outer loops that failed on a reported inner loop."""
    notes = remarks_module._parse(REPORT, "/tmp/x/kernel.c")
    chosen = remarks_module._select(notes, pragma_lines={14, 17})
    got = [f"{note.line}:{note.kind}: {text}" for note, text in chosen]
    assert got == [
        "4:optimized: loop vectorized using 64 byte vectors "
        "(versioned: runtime check for possible aliasing)",
        "6:missed: couldn't vectorize loop: no vectype for stmt: _12 = *_11",
        "8:missed: couldn't vectorize loop: call to helper() may write memory (line 9)",
        "11:optimized: loop vectorized using 64 byte vectors",
        "19:optimized: loop vectorized using 64 byte vectors",
    ]
