"""Compiling kernels: trimmed error messages, the object cache and its key, timeouts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from accelopt.backends.cpu.compiler import (
    MAX_ERROR_LINES,
    cache_key,
    compile_kernel,
    prototype,
    trim_compiler_output,
)
from accelopt.backends.status import Status

DOUBLE = "void kernel(const float *x, float *y) { for (int i = 0; i < M; i++) y[i] = 2 * x[i]; }\n"
SIGNATURE = prototype(1, 1)

WORK = "/tmp/accelopt-worker-abc123/eval-7"
GCC_OUTPUT = f"""\
{WORK}/kernel.c: In function 'kernel':
{WORK}/kernel.c:3:12: error: 'nope' undeclared (first use in this function)
    3 |     y[0] = nope;
      |            ^~~~
{WORK}/kernel.c:3:12: note: each undeclared identifier is reported only once
{WORK}/kernel.c:5:1: warning: control reaches end of non-void function
"""


# -- trim_compiler_output -----------------------------------------------------------------------


def test_trim_keeps_the_error_and_its_context_with_a_short_path():
    text = trim_compiler_output(GCC_OUTPUT, f"{WORK}/kernel.c")
    assert text.splitlines() == [
        "kernel.c:3:12: error: 'nope' undeclared (first use in this function)",
        "    3 |     y[0] = nope;",
        "      |            ^~~~",
    ]
    assert WORK not in text and "warning" not in text


def test_trim_keeps_linker_errors():
    output = "/usr/bin/ld: kernel.o: in function `kernel':\nkernel.c:(.text+0x1): undefined reference to `nope'\ncollect2: error: ld returned 1 exit status\n"  # noqa: E501
    text = trim_compiler_output(output, "/x/kernel.c")
    assert "undefined reference to `nope'" in text
    assert "collect2: error" in text


def test_trim_without_error_lines_keeps_the_tail():
    output = "\n".join(f"line {i}" for i in range(50))
    text = trim_compiler_output(output, "/x/kernel.c")
    assert text.splitlines() == [f"line {i}" for i in range(50 - MAX_ERROR_LINES, 50)]


def test_trim_caps_the_length():
    output = "\n".join(f"/x/kernel.c:{i}:1: error: problem number {i}" for i in range(100))
    lines = trim_compiler_output(output, "/x/kernel.c").splitlines()
    assert len(lines) == MAX_ERROR_LINES + 1
    assert lines[0] == "kernel.c:0:1: error: problem number 0"
    assert lines[-1] == f"... ({100 - MAX_ERROR_LINES} more lines)"


def test_trim_drops_repeated_lines():
    line = "/x/kernel.c:1:1: error: same thing"
    assert (
        trim_compiler_output(f"{line}\n{line}\n", "/x/kernel.c")
        == "kernel.c:1:1: error: same thing"
    )


# -- prototype and cache key --------------------------------------------------------------------


def test_prototype_lists_inputs_then_outputs():
    assert prototype(1, 1) == "void kernel(const float *, float *);\n"
    assert prototype(2, 1) == "void kernel(const float *, const float *, float *);\n"


def test_cache_key_changes_with_every_part(cc):
    key = cache_key(DOUBLE, {"M": 4}, SIGNATURE, cc)
    assert key == cache_key(DOUBLE, {"M": 4}, SIGNATURE, cc)
    assert key != cache_key(DOUBLE + "\n", {"M": 4}, SIGNATURE, cc)
    assert key != cache_key(DOUBLE, {"M": 8}, SIGNATURE, cc)
    assert key != cache_key(DOUBLE, {"M": 4, "N": 1}, SIGNATURE, cc)
    assert key != cache_key(DOUBLE, {"M": 4}, prototype(2, 1), cc)
    assert key != cache_key(DOUBLE, {"M": 4}, SIGNATURE, replace(cc, version=cc.version + "x"))


def test_cache_key_ignores_the_order_of_defines(cc):
    assert cache_key(DOUBLE, {"M": 4, "N": 2}, SIGNATURE, cc) == cache_key(
        DOUBLE, {"N": 2, "M": 4}, SIGNATURE, cc
    )


# -- compile_kernel -----------------------------------------------------------------------------


@pytest.fixture
def dirs(tmp_path):
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    return work, cache


def test_second_compile_is_cached(cc, dirs):
    work, cache = dirs
    first = compile_kernel(DOUBLE, {"M": 4}, SIGNATURE, work, cache, 60, cc)
    assert first.ok and not first.cached
    assert first.artifact is not None and first.artifact.is_file()
    assert first.artifact.parent == cache and first.seconds > 0
    second = compile_kernel(DOUBLE, {"M": 4}, SIGNATURE, work, cache, 60, cc)
    assert second.ok and second.cached
    assert second.artifact == first.artifact


def test_changed_define_or_source_is_a_new_build(cc, dirs):
    work, cache = dirs
    first = compile_kernel(DOUBLE, {"M": 4}, SIGNATURE, work, cache, 60, cc)
    other_size = compile_kernel(DOUBLE, {"M": 8}, SIGNATURE, work, cache, 60, cc)
    other_source = compile_kernel(
        DOUBLE.replace("2 * x[i]", "3 * x[i]"), {"M": 4}, SIGNATURE, work, cache, 60, cc
    )
    for built in (other_size, other_source):
        assert built.ok and not built.cached
        assert built.artifact != first.artifact
    assert len(list(cache.glob("*.so"))) == 3


def test_compile_error_names_kernel_c_and_leaves_nothing_behind(cc, dirs):
    work, cache = dirs
    source = "void kernel(const float *x, float *y) { y[0] = x[0] * nope; }\n"
    built = compile_kernel(source, {"M": 4}, SIGNATURE, work, cache, 60, cc)
    assert built.status is Status.COMPILE_ERROR and not built.ok
    assert "kernel.c:1:" in built.error and "nope" in built.error
    assert str(work) not in built.error
    assert list(cache.iterdir()) == []  # no object, no temporary file


def test_signature_mismatch_is_a_compile_error(cc, dirs):
    work, cache = dirs
    source = "void kernel(const float *x, float *y, float *z) { y[0] = z[0] = x[0]; }\n"
    built = compile_kernel(source, {"M": 4}, SIGNATURE, work, cache, 60, cc)
    assert built.status is Status.COMPILE_ERROR
    assert "conflicting types" in built.error
    assert str(work) not in built.error


def test_sizes_arrive_as_defines(cc, dirs):
    work, cache = dirs
    source = "#if M != 4 || N != 6\n#error wrong sizes\n#endif\n" + DOUBLE
    assert compile_kernel(source, {"M": 4, "N": 6}, SIGNATURE, work, cache, 60, cc).ok
    wrong = compile_kernel(source, {"M": 5, "N": 6}, SIGNATURE, work, cache, 60, cc)
    assert wrong.status is Status.COMPILE_ERROR and "wrong sizes" in wrong.error


def test_compile_timeout_is_a_compile_error(cc, dirs):
    work, cache = dirs
    built = compile_kernel(DOUBLE, {"M": 4}, SIGNATURE, work, cache, 1e-3, cc)
    assert built.status is Status.COMPILE_ERROR
    assert "ran past" in built.error
    assert list(cache.glob("*")) == []
