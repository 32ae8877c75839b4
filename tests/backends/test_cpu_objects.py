"""Checks on the built object (objects.py): nothing runs at load time, nothing is mapped writable
and executable, no executable stack, no library but libc, libm, libmvec and libgomp.

Hostile objects are built with the contract's compile flags but other link flags (what a linker
default or a kernel's attribute would give), or patched from an innocent object where no
compiler flag produces the defect."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from accelopt.backends.cpu import compiler
from accelopt.backends.cpu.compiler import (
    LIBS,
    LINK_FLAGS,
    BuildInputs,
    compile_kernel,
    kernel_flags,
    prototype,
)
from accelopt.backends.cpu.compiler_process import run_compiler
from accelopt.backends.cpu.objects import ALLOWED_LIBRARIES, check_object
from accelopt.backends.status import Status
from accelopt.errors import CompilerNotFoundError
from accelopt.hardware.toolchain import Compiler, find_compiler

KERNEL = """#include <math.h>
#include <omp.h>
void kernel(const float *x, float *y) {
#pragma omp parallel for
    for (int i = 0; i < M; i++) y[i] = expf(x[i]) + (float)omp_get_num_threads();
}
"""
# (GCC drops an empty constructor: these do something)
RAN = "volatile int ran;\n"
CONSTRUCTOR = KERNEL + RAN + "__attribute__((constructor)) static void init(void) { ran = 1; }\n"


def link(source: str, cc: Compiler, tmp_path: Path, link_flags: tuple[str, ...]) -> Path:
    """Build ``source`` with the contract's compile flags and ``link_flags``, with no checks."""
    (tmp_path / "kernel.c").write_text(source)
    flags = [flag for flag in kernel_flags(cc) if flag not in LINK_FLAGS]
    cmd = [*cc.command, *flags, *link_flags, "-DM=16", "-o", "kernel.so", "kernel.c", *LIBS]
    code, output = run_compiler(cmd, 60, cwd=tmp_path)
    assert code == 0, output
    return tmp_path / "kernel.so"


def without(flag: str) -> tuple[str, ...]:
    return tuple(f for f in LINK_FLAGS if f != flag)


# -- what passes ----------------------------------------------------------------------------------


def test_an_openmp_kernel_passes(cc, tmp_path):
    built = compile_kernel(
        BuildInputs(KERNEL, {"M": 16}, prototype(1, 1), cc), tmp_path, tmp_path / "so", 60
    )
    assert built.ok and built.artifact is not None, built.error
    assert check_object(built.artifact) is None


def test_the_default_start_files_would_be_refused(cc, tmp_path):
    """Why kernels are linked with -nostartfiles: crti.o's _init and crtbeginS.o's frame_dummy
    are code that runs when the object is loaded."""
    reason = check_object(link(KERNEL, cc, tmp_path, without("-nostartfiles")))
    assert reason is not None and "runs when it is loaded" in reason


# -- what is refused ------------------------------------------------------------------------------

# (source, link flags, what the reason names)
BUILT = {
    "a constructor": (CONSTRUCTOR, LINK_FLAGS, "function init() in its init array"),
    "a destructor": (
        KERNEL + RAN + "__attribute__((destructor)) static void fini(void) { ran = 2; }\n",
        LINK_FLAGS,
        "DT_FINI_ARRAY",
    ),
    "a pointer placed in .init_array": (
        KERNEL + RAN + "static void run(void) { ran = 3; }\n"
        '__attribute__((section(".init_array"), used)) static void (*p)(void) = run;\n',
        LINK_FLAGS,
        "function run() in its init array",
    ),
    "a function named _init": (
        KERNEL + RAN + "void _init(void) { ran = 4; }\n",
        LINK_FLAGS,
        "DT_INIT",
    ),
    "an indirect function": (
        KERNEL + "static void impl(void) { }\n"
        "static void (*resolve(void))(void) { return impl; }\n"
        'void f(void) __attribute__((ifunc("resolve")));\n',
        LINK_FLAGS,
        "indirect function (f)",
    ),
    "an executable stack": (
        KERNEL,
        (*without("-Wl,-z,noexecstack"), "-Wl,-z,execstack"),
        "executable stack",
    ),
    "a nested function's trampoline": (
        "void kernel(const float *x, float *y) {\n"
        "    float s = x[0];\n"
        "    float add(float a) { return a + s; }\n"
        "    float (*f)(float) = add;\n"
        "    y[0] = f(1);\n"
        "}\n",
        without("-Wl,-z,noexecstack"),
        "executable stack",
    ),
    "a library search path": (KERNEL, (*LINK_FLAGS, "-Wl,-rpath,/tmp"), "DT_RUNPATH"),
}


@pytest.mark.parametrize(("source", "flags", "named"), BUILT.values(), ids=BUILT.keys())
def test_hostile_objects_are_refused(source, flags, named, cc, tmp_path):
    reason = check_object(link(source, cc, tmp_path, flags))
    assert reason is not None and named in reason, reason
    assert reason.startswith("the built object") and "\n" not in reason


def test_the_contracts_link_flags_keep_a_trampoline_off_the_stack(cc, tmp_path):
    """With -z noexecstack the stack stays non-executable even when GCC asks for it: the call
    through the trampoline faults instead of running code from the stack."""
    source = BUILT["a nested function's trampoline"][0]
    assert check_object(link(source, cc, tmp_path, LINK_FLAGS)) is None


# -- refused on patched objects (no flag of this toolchain makes them) ----------------------------

PT_LOAD, PT_GNU_STACK, PF_X, PF_W = 1, 0x6474E551, 1, 2
DT_FLAGS, DF_TEXTREL = 30, 4


def program_headers(data: bytearray) -> list[tuple[int, int, int]]:
    """(offset of the header, p_type, p_flags) of each program header."""
    phoff, phentsize, phnum = (
        struct.unpack_from("<Q", data, 32)[0],
        *struct.unpack_from("<HH", data, 54),
    )
    return [
        (phoff + i * phentsize, *struct.unpack_from("<II", data, phoff + i * phentsize))
        for i in range(phnum)
    ]


def set_flags(data: bytearray, which, add: int) -> None:
    for at, p_type, flags in program_headers(data):
        if which(p_type, flags):
            struct.pack_into("<I", data, at + 4, flags | add)
            return
    raise AssertionError("no such program header")


def drop_stack_header(data: bytearray) -> None:
    for at, p_type, _ in program_headers(data):
        if p_type == PT_GNU_STACK:
            struct.pack_into("<I", data, at, 0)  # PT_NULL


def add_textrel(data: bytearray) -> None:
    dynamic = next(
        struct.unpack_from("<Q", data, at + 8)[0]
        for at, p_type, _ in program_headers(data)
        if p_type == 2
    )
    for at in range(dynamic, len(data), 16):
        tag, value = struct.unpack_from("<qQ", data, at)
        if tag == DT_FLAGS:  # the contract's -z now sets DF_BIND_NOW
            struct.pack_into("<qQ", data, at, tag, value | DF_TEXTREL)
            return
    raise AssertionError("no DT_FLAGS")


def rename_libm(data: bytearray) -> None:
    data[:] = data.replace(b"libm.so.6\0", b"libX.so.6\0")


PATCHES = {
    "no PT_GNU_STACK": (drop_stack_header, "no PT_GNU_STACK"),
    "PT_GNU_STACK executable": (
        lambda d: set_flags(d, lambda t, f: t == PT_GNU_STACK, PF_X),
        "executable stack",
    ),
    "a writable segment made executable": (
        lambda d: set_flags(d, lambda t, f: t == PT_LOAD and f & PF_W, PF_X),
        "both writable and executable",
    ),
    "read-only data made executable": (
        lambda d: set_flags(d, lambda t, f: t == PT_LOAD and not f & (PF_W | PF_X), PF_X),
        "executable",
    ),
    "text relocations": (add_textrel, "text relocations"),
    "another library": (rename_libm, "needs libX.so.6"),
    "not an ELF file": (lambda d: d.__setitem__(slice(0, 4), b"\0ELF"), "cannot be read"),
    "truncated": (lambda d: d.__delitem__(slice(200, None)), "cannot be read"),
}


@pytest.fixture(scope="module")
def innocent(tmp_path_factory) -> bytes:
    try:
        cc = find_compiler()
    except CompilerNotFoundError as exc:  # as the session fixture does
        pytest.skip(str(exc))
    tmp = tmp_path_factory.mktemp("innocent")
    path = link(KERNEL, cc, tmp, LINK_FLAGS)
    assert check_object(path) is None
    return path.read_bytes()


@pytest.mark.parametrize(("patch", "named"), PATCHES.values(), ids=PATCHES.keys())
def test_patched_objects_are_refused(patch, named, innocent, tmp_path):
    data = bytearray(innocent)
    patch(data)
    path = tmp_path / "kernel.so"
    path.write_bytes(bytes(data))
    reason = check_object(path)
    assert reason is not None and named in reason, reason


def test_the_allowed_libraries_are_the_runtime_of_c_and_openmp():
    assert {"libc.so.6", "libm.so.6", "libmvec.so.1", "libgomp.so.1"} <= ALLOWED_LIBRARIES
    assert not any("pthread" in lib or "dl" in lib.split(".")[0] for lib in ALLOWED_LIBRARIES)


def test_an_empty_file_is_refused(tmp_path):
    (tmp_path / "kernel.so").write_bytes(b"")
    assert "cannot be read" in (check_object(tmp_path / "kernel.so") or "")


# -- compile_kernel: an object that fails never reaches the cache ---------------------------------


def test_a_refused_object_is_not_cached(cc, tmp_path, monkeypatch):
    monkeypatch.setattr(compiler, "check_object", lambda path: "the built object is refused")
    cache = tmp_path / "so"
    built = compile_kernel(BuildInputs(KERNEL, {"M": 16}, prototype(1, 1), cc), tmp_path, cache, 60)
    assert built.status is Status.REJECTED and built.error == "the built object is refused"
    assert list(cache.iterdir()) == []


def test_a_constructor_the_source_checks_miss_is_refused_on_the_object(cc, tmp_path, monkeypatch):
    """Defence in depth: with the preprocessed check off, the object check still refuses."""
    monkeypatch.setattr(compiler, "check_preprocessed_output", lambda lines, arch: None)
    cache = tmp_path / "so"
    built = compile_kernel(
        BuildInputs(CONSTRUCTOR, {"M": 16}, prototype(1, 1), cc), tmp_path, cache, 60
    )
    assert built.status is Status.REJECTED and "init()" in built.error
    assert list(cache.iterdir()) == []


# -- aarch64: the toolchain's own load-time code -------------------------------------------------

CROSS_CC = "aarch64-linux-gnu-gcc"
ATOMIC = (
    "static int count;\n"
    "void kernel(const float *x, float *y) {\n"
    "#pragma omp parallel\n"
    "    __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED);\n"
    "    y[0] = x[0];\n"
    "}\n"
)


@pytest.mark.skipif(shutil.which(CROSS_CC) is None, reason=f"{CROSS_CC} is not installed")
@pytest.mark.parametrize(
    ("source", "reason"),
    [(ATOMIC, None), (ATOMIC + CONSTRUCTOR.replace(KERNEL, ""), "function init()")],
)
def test_libgccs_lse_probe_is_the_only_initializer_allowed(source, reason, tmp_path):
    """Below armv8.1 an atomic links libgcc's outline atomics, whose probe for LSE runs at load
    time (from lse-init.o): allowed, and nothing beside it."""
    (tmp_path / "kernel.c").write_text(source)
    cmd = [CROSS_CC, "-O3", "-mcpu=cortex-a72", *compiler.OTHER_FLAGS, *LINK_FLAGS]
    code, output = run_compiler([*cmd, "-o", "kernel.so", "kernel.c", *LIBS], 60, cwd=tmp_path)
    assert code == 0, output
    found = check_object(tmp_path / "kernel.so")
    if reason is None:
        assert found is None
    else:
        assert found is not None and reason in found
