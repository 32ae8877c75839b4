"""Compiling kernels: trimmed error messages, the object cache and its key, timeouts, the
compiler's limits, and the verification of cached objects."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from dataclasses import replace

import pytest

from accelopt.backends.cpu import compiler
from accelopt.backends.cpu.compiler import (
    MAX_ERROR_LINES,
    BuildInputs,
    cache_key,
    compile_kernel,
    prototype,
    trim_compiler_output,
)
from accelopt.backends.cpu.compiler_process import COMPILER_MEMORY_BYTES, run_compiler
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
    key = cache_key(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc))
    assert key == cache_key(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc))
    assert key != cache_key(BuildInputs(DOUBLE + "\n", {"M": 4}, SIGNATURE, cc))
    assert key != cache_key(BuildInputs(DOUBLE, {"M": 8}, SIGNATURE, cc))
    assert key != cache_key(BuildInputs(DOUBLE, {"M": 4, "N": 1}, SIGNATURE, cc))
    assert key != cache_key(BuildInputs(DOUBLE, {"M": 4}, prototype(2, 1), cc))
    assert key != cache_key(
        BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, replace(cc, version=cc.version + "x"))
    )


def test_cache_key_ignores_the_order_of_defines(cc):
    assert cache_key(BuildInputs(DOUBLE, {"M": 4, "N": 2}, SIGNATURE, cc)) == cache_key(
        BuildInputs(DOUBLE, {"N": 2, "M": 4}, SIGNATURE, cc)
    )


# -- compile_kernel -----------------------------------------------------------------------------


@pytest.fixture
def dirs(tmp_path):
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    return work, cache


def test_second_compile_is_cached(cc, dirs):
    work, cache = dirs
    first = compile_kernel(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert first.ok and not first.cached
    assert first.artifact is not None and first.artifact.is_file()
    assert first.artifact.parent == cache and first.seconds > 0
    second = compile_kernel(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert second.ok and second.cached
    assert second.artifact == first.artifact


def test_changed_define_or_source_is_a_new_build(cc, dirs):
    work, cache = dirs
    first = compile_kernel(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    other_size = compile_kernel(BuildInputs(DOUBLE, {"M": 8}, SIGNATURE, cc), work, cache, 60)
    other_source = compile_kernel(
        BuildInputs(DOUBLE.replace("2 * x[i]", "3 * x[i]"), {"M": 4}, SIGNATURE, cc),
        work,
        cache,
        60,
    )
    for built in (other_size, other_source):
        assert built.ok and not built.cached
        assert built.artifact != first.artifact
    assert len(list(cache.glob("*.so"))) == 3


def test_compile_error_names_kernel_c_and_leaves_nothing_behind(cc, dirs):
    work, cache = dirs
    source = "void kernel(const float *x, float *y) { y[0] = x[0] * nope; }\n"
    built = compile_kernel(BuildInputs(source, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert built.status is Status.COMPILE_ERROR and not built.ok
    assert "kernel.c:1:" in built.error and "nope" in built.error
    assert str(work) not in built.error
    assert list(cache.iterdir()) == []  # no object, no temporary file


def test_signature_mismatch_is_a_compile_error(cc, dirs):
    work, cache = dirs
    source = "void kernel(const float *x, float *y, float *z) { y[0] = z[0] = x[0]; }\n"
    built = compile_kernel(BuildInputs(source, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert built.status is Status.COMPILE_ERROR
    assert "conflicting types" in built.error
    assert str(work) not in built.error


def test_sizes_arrive_as_defines(cc, dirs):
    work, cache = dirs
    source = "#if M != 4 || N != 6\n#error wrong sizes\n#endif\n" + DOUBLE
    assert compile_kernel(BuildInputs(source, {"M": 4, "N": 6}, SIGNATURE, cc), work, cache, 60).ok
    wrong = compile_kernel(BuildInputs(source, {"M": 5, "N": 6}, SIGNATURE, cc), work, cache, 60)
    assert wrong.status is Status.COMPILE_ERROR and "wrong sizes" in wrong.error


def test_compile_timeout_is_a_compile_error(cc, dirs):
    work, cache = dirs
    built = compile_kernel(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc), work, cache, 1e-3)
    assert built.status is Status.COMPILE_ERROR
    assert "ran past" in built.error
    assert list(cache.glob("*")) == []


def test_a_quoted_include_finds_nothing_in_the_work_directory(cc, dirs):
    """The compiler works in a fresh directory: a header left beside the worker's files (by
    an earlier kernel, say) is not what `#include "math.h"` reads."""
    work, cache = dirs
    (work / "math.h").write_text("#error a planted header\n")
    source = '#include "math.h"\n' + DOUBLE
    built = compile_kernel(BuildInputs(source, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert built.ok, built.error
    assert sorted(p.name for p in work.iterdir()) == ["math.h"]  # the build directory is gone


# -- the compiler under limits ------------------------------------------------------------------

# 8^8 tokens from 200 bytes: the preprocessor runs out of memory long before it finishes.
MACRO_BOMB = """#define A(x) x x x x x x x x
#define B(x) A(A(x))
#define C(x) B(B(x))
#define D(x) C(C(x))
void kernel(const float *x, float *y) { y[0] = x[0] 0 D(D(+1)); }
"""


def test_a_macro_bomb_runs_out_of_the_memory_limit(cc, dirs):
    work, cache = dirs
    start = time.perf_counter()
    built = compile_kernel(
        BuildInputs(MACRO_BOMB, {"M": 4}, SIGNATURE, cc), work, cache, 60, memory_bytes=256 << 20
    )
    assert time.perf_counter() - start < 15
    assert built.status is Status.COMPILE_ERROR
    assert built.error == (
        "the compiler ran out of its 256 MiB memory limit (a macro expansion too large?)"
    )
    assert list(cache.iterdir()) == []


def test_a_kernel_quoting_the_limits_words_gets_its_own_error(cc, dirs):
    work, cache = dirs
    source = "#error out of memory: virtual memory exhausted, File too large\n" + DOUBLE
    built = compile_kernel(BuildInputs(source, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert built.status is Status.COMPILE_ERROR
    assert built.error.startswith("kernel.c:1:2: error: #error out of memory")


def test_the_default_memory_limit_is_2_gib():
    assert COMPILER_MEMORY_BYTES == 2 << 30


def test_the_compiler_runs_under_limits(tmp_path):
    code, output = run_compiler(
        ["sh", "-c", "ulimit -v; ulimit -f; ulimit -t; ulimit -c"],
        30,
        memory_bytes=256 << 20,
        file_bytes=1 << 20,
    )
    assert code == 0
    memory_kib, file_blocks, cpu_s, core = output.split()
    assert int(memory_kib) == 256 << 10
    assert int(file_blocks) * 512 <= 1 << 20  # blocks of 512 bytes (dash) or 1024 (bash)
    assert int(cpu_s) == 31 and core == "0"


def test_a_file_over_the_limit_is_not_written(tmp_path):
    code, _ = run_compiler(
        ["sh", "-c", "head -c 3000000 /dev/zero > big"], 30, cwd=tmp_path, file_bytes=1 << 20
    )
    assert code != 0
    assert (tmp_path / "big").stat().st_size <= 1 << 20


def test_a_preprocessed_kernel_over_the_limit_is_a_compile_error(cc, dirs, monkeypatch):
    monkeypatch.setattr(compiler, "MAX_PREPROCESSED_BYTES", 256 << 10)
    work, cache = dirs
    statements = "    y[0] = x[0] 0 C(+1);\n" * 50  # 4096 "+1"s each: 600 KB preprocessed
    source = MACRO_BOMB.split("void kernel")[0] + f"{DOUBLE[:-3]}\n{statements}}}\n"
    built = compile_kernel(BuildInputs(source, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert built.status is Status.COMPILE_ERROR
    assert built.error == "the preprocessed kernel is over 0.25 MiB (a macro expansion too large?)"


def test_a_flood_of_output_is_capped():
    code, output = run_compiler(
        ["sh", "-c", "yes error | head -c 20000000"], 30, max_output_bytes=1000
    )
    assert code == 0
    assert len(output) < 1100 and output.endswith("(19999000 more bytes of output)")


# -- the cache is verified before reuse ---------------------------------------------------------


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_cached_objects_are_read_only_with_their_hash(cc, dirs):
    work, cache = dirs
    built = compile_kernel(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert built.artifact is not None
    recorded = built.artifact.with_suffix(".sha256")
    assert recorded.read_text().strip() == sha256(built.artifact)
    for path in (built.artifact, recorded):
        assert path.stat().st_mode & 0o777 == 0o444
    assert sorted(p.suffix for p in cache.iterdir()) == [".sha256", ".so"]  # no temporary left


def test_an_object_replaced_in_the_cache_is_rebuilt_not_loaded(cc, dirs, caplog):
    work, cache = dirs
    first = compile_kernel(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    other = compile_kernel(
        BuildInputs(DOUBLE.replace("2 *", "3 *"), {"M": 4}, SIGNATURE, cc), work, cache, 60
    )
    assert first.artifact is not None and other.artifact is not None
    good = sha256(first.artifact)
    os.replace(shutil.copy(other.artifact, cache / "copy"), first.artifact)  # as a kernel could
    assert sha256(first.artifact) != good
    with caplog.at_level(logging.WARNING, logger=compiler.__name__):
        again = compile_kernel(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert again.ok and not again.cached and again.artifact == first.artifact
    assert sha256(first.artifact) == good  # the build is reproducible: the same object again
    assert "not the one built" in caplog.text and "its hash differs" in caplog.text
    third = compile_kernel(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert third.cached


def test_an_object_without_its_hash_is_rebuilt(cc, dirs, caplog):
    work, cache = dirs
    first = compile_kernel(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert first.artifact is not None
    first.artifact.with_suffix(".sha256").unlink()
    with caplog.at_level(logging.WARNING, logger=compiler.__name__):
        again = compile_kernel(BuildInputs(DOUBLE, {"M": 4}, SIGNATURE, cc), work, cache, 60)
    assert again.ok and not again.cached
    assert "no recorded hash" in caplog.text
    assert first.artifact.with_suffix(".sha256").read_text().strip() == sha256(first.artifact)


def test_a_kernel_is_built_with_this_machines_cache_sizes_and_a_cross_build_without(cc):
    from accelopt.backends.cpu import cache_macros as macros
    from accelopt.backends.cpu.backend import build_inputs
    from accelopt.hardware.cpuinfo import cache_levels, data_cache
    from accelopt.problems import load_problem

    silu = load_problem("silu")
    sizes = silu.workload("small").sizes
    defines = build_inputs(DOUBLE, silu, sizes, cc).defines
    l2 = data_cache(cache_levels(), 2)
    if l2 is None:
        pytest.skip("sysfs lists no L2 cache here")
    assert defines["ACCELOPT_L2_BYTES"] == l2.size_bytes and defines["N"] == sizes["N"]
    assert macros.cache_macros(replace(cc, machine="aarch64-linux-gnu")) == {}
