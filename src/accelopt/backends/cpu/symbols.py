"""What a built kernel imports: the check that no spelling in the source can get around.

Text checks see the source; a call to ``write`` can hide behind a macro, a function pointer or a
GCC builtin, but the shared object must still import the symbol ``write``. Every undefined
dynamic symbol must be a libm/libmvec export, an OpenMP entry point, or on the short list below
(memory, strings, a few stdlib functions, and printing to the captured log).

The symbols are read with ``nm``; for a cross compiler (e.g. ``aarch64-linux-gnu-gcc``) with the
target's own ``<machine>-nm`` when it is installed, since the host's may not read that format.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

from accelopt.hardware.toolchain import Compiler

ALLOWED = frozenset(
    {
        # memory and strings (<stdlib.h>, <string.h>)
        "malloc",
        "calloc",
        "realloc",
        "free",
        "aligned_alloc",
        "posix_memalign",
        "memalign",
        "memcpy",
        "memmove",
        "memset",
        "memcmp",
        "memchr",
        "strlen",
        "strcmp",
        "strncmp",
        "strcpy",
        "strncpy",
        "strcat",
        "strchr",
        "strstr",
        "__memcpy_chk",
        "__memset_chk",
        "__memmove_chk",
        # a few stdlib functions
        "qsort",
        "bsearch",
        "abs",
        "labs",
        "llabs",
        "div",
        "ldiv",
        "rand",
        "srand",
        "rand_r",
        "abort",
        "exit",
        "__errno_location",
        # printing goes to the evaluation's capped log
        "printf",
        "puts",
        "putchar",
        "__printf_chk",
        # toolchain boilerplate
        "__stack_chk_fail",
        "__cxa_finalize",
        "__gmon_start__",
        "_ITM_deregisterTMCloneTable",
        "_ITM_registerTMCloneTable",
        # aarch64: libgcc's outline atomics (the default below armv8.1, e.g. for Cortex-A72),
        # linked in for `#pragma omp atomic` or __atomic_*, read AT_HWCAP once to pick LSE or not
        "__getauxval",
    }
)
ALLOWED_PREFIXES = ("GOMP_", "omp_", "_ZGV")  # OpenMP runtime, libmvec vector math


def nm_for(compiler: Compiler) -> str:
    """The ``nm`` that reads what ``compiler`` builds: ``<machine>-nm`` for a cross compiler
    when it is on PATH, else ``nm``."""
    if compiler.cross and compiler.machine and shutil.which(f"{compiler.machine}-nm"):
        return f"{compiler.machine}-nm"
    return "nm"


@cache
def libm_exports(compiler: Compiler) -> frozenset[str]:
    """The functions libm.so.6 (and libmvec) define, as the compiler would link them."""
    names: set[str] = set()
    for lib in ("libm.so.6", "libmvec.so.1"):
        path = subprocess.run(
            [*compiler.command, f"-print-file-name={lib}"], capture_output=True, text=True
        ).stdout.strip()
        if Path(path).is_file():
            names |= set(_nm(Path(path), "--defined-only", nm_for(compiler)))
    return frozenset(names)


def _nm(path: Path, which: str, nm: str = "nm") -> list[str]:
    out = subprocess.run([nm, "-D", which, str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"nm failed on {path.name}: {out.stderr.strip()[:200]}")
    return [re.split(r"@", line.split()[-1])[0] for line in out.stdout.splitlines() if line.strip()]


def imported_symbols(shared_object: Path, nm: str = "nm") -> list[str]:
    return _nm(shared_object, "--undefined-only", nm)


def disallowed_symbols(shared_object: Path, compiler: Compiler) -> list[str]:
    """The symbols the kernel imports that a kernel may not use, sorted."""
    libm = libm_exports(compiler)
    return sorted(
        name
        for name in set(imported_symbols(shared_object, nm_for(compiler)))
        if name not in ALLOWED and name not in libm and not name.startswith(ALLOWED_PREFIXES)
    )
