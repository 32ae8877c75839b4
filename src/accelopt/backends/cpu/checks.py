"""Static checks on an untrusted C kernel, before it reaches the compiler.

These are a first fence, not the sandbox: the worker process (limits, scratch directory, no
network) is what contains a kernel. They catch what a kernel has no business doing, with a reason
an agent can act on.

Headers. A kernel may include the common headers (``COMMON_HEADERS``) and the vector intrinsics
headers of its target architecture (``INTRINSICS_HEADERS``: ``<immintrin.h>`` on x86-64,
``<arm_neon.h>`` and ``<arm_sve.h>`` on aarch64); the target is the architecture of the compiler
accelopt builds kernels with (``CC``, ``-dumpmachine``), and that list is what the agents are told
(``allowed_headers``). The check itself accepts the intrinsics headers of every architecture
accelopt knows (``ACCEPTED_HEADERS``), so that one source can carry a fast path per architecture
behind ``#if defined(__x86_64__)`` / ``#elif defined(__aarch64__)``: the preprocessor never reads an
include in a branch that is not taken, and another architecture's header outside such a branch
does not compile (the target's compiler does not ship it, or it stops with an #error). Accepting
it opens nothing: these headers only declare intrinsics, and the symbols of the built object are
checked anyway (``symbols.py``). The target only changes what the rejection messages advise.
"""

from __future__ import annotations

import re

from accelopt import settings
from accelopt.backends.cpu.compiler import compiler_for
from accelopt.errors import CompilerNotFoundError
from accelopt.hardware.toolchain import host_arch, normal_arch

COMMON_HEADERS = frozenset(
    {
        "math.h",
        "string.h",
        "stdlib.h",
        "stdint.h",
        "omp.h",
        "stddef.h",
        "stdbool.h",
        "float.h",
        "limits.h",
        "stdalign.h",
    }
)
INTRINSICS_HEADERS: dict[str, tuple[str, ...]] = {
    "x86_64": ("immintrin.h",),
    "aarch64": ("arm_neon.h", "arm_sve.h"),
}
ACCEPTED_HEADERS = COMMON_HEADERS.union(*INTRINSICS_HEADERS.values())

_PROCESS = {
    "system", "popen", "pclose", "fork", "vfork", "clone", "posix_spawn", "posix_spawnp",
    "dlopen", "dlsym", "dlclose", "dlmopen", "dlvsym", "syscall", "ptrace", "setrlimit",
    "prlimit", "getrlimit", "chdir", "chroot", "setuid", "setgid", "daemon", "atexit",
    "pthread_create", "pthread_kill",
}  # fmt: skip
_FILES = {
    "fopen", "freopen", "fdopen", "fclose", "fread", "fwrite", "fprintf", "fputs", "fputc",
    "fgets", "fgetc", "fscanf", "fflush", "fseek", "ftell", "rewind", "tmpfile", "tmpnam",
    "open", "openat", "creat", "close", "read", "write", "pread", "pwrite", "lseek", "unlink",
    "unlinkat", "remove", "rename", "mkdir", "rmdir", "stat", "fstat", "lstat", "access",
    "dup", "dup2", "pipe", "mmap", "munmap", "mprotect", "ioctl", "fcntl", "sendfile",
    "truncate", "ftruncate", "symlink", "link", "readlink", "opendir", "readdir", "getenv",
    "setenv", "putenv", "environ", "__environ",
}  # fmt: skip
_SOCKETS = {
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "send", "sendto",
    "sendmsg", "recv", "recvfrom", "recvmsg", "getaddrinfo", "gethostbyname", "shutdown",
    "setsockopt", "getsockopt",
}  # fmt: skip
_SIGNALS = {
    "signal", "sigaction", "raise", "kill", "killpg", "sigprocmask", "pthread_sigmask",
    "alarm", "setitimer", "sigsetjmp", "siglongjmp", "setjmp", "longjmp", "sigaltstack",
}  # fmt: skip

BANNED = (
    {name: "process control" for name in _PROCESS}
    | {name: "file and environment access" for name in _FILES}
    | {name: "network access" for name in _SOCKETS}
    | {name: "signal handling" for name in _SIGNALS}
)

_COMMENT_OR_LITERAL = re.compile(
    r"""/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""", re.DOTALL
)
_INCLUDE = re.compile(r"^\s*#\s*include\s*(?:<([^>]*)>|\"([^\"]*)\"|(\S+))", re.MULTILINE)
_IDENTIFIER = re.compile(r"\b([A-Za-z_]\w*)\b(\s*\()?")
# Names that are never innocent: banned wherever they appear (a function pointer is as bad as a
# call). The others (read, write, open, signal, ...) are common words and banned only as calls.
_DISTINCTIVE = _PROCESS | {
    "socket", "socketpair", "getaddrinfo", "gethostbyname", "sigaction", "sigprocmask",
    "fopen", "freopen", "fdopen", "tmpfile", "mmap", "mprotect", "environ", "__environ",
}  # fmt: skip
_ASM = {"asm", "__asm__", "__asm"}
_ATTRIBUTE = re.compile(r"__attribute(?:__)?\s*\(\s*\((.*?)\)\s*\)", re.DOTALL)
_IDENTIFIER_ONLY = re.compile(r"\b[A-Za-z_]\w*\b")
FORBIDDEN_ATTRIBUTES = {"constructor", "destructor", "ifunc", "alias", "weakref", "section"}


def intrinsics_headers(arch: str) -> tuple[str, ...]:
    """The vector intrinsics headers of ``arch`` (``x86_64``, ``aarch64``, ...); () if unknown."""
    return INTRINSICS_HEADERS.get(normal_arch(arch), ())


def allowed_headers(arch: str) -> tuple[str, ...]:
    """What a kernel for ``arch`` may include, sorted: the common and the intrinsics headers."""
    return tuple(sorted(COMMON_HEADERS.union(intrinsics_headers(arch))))


def intrinsics_advice(arch: str) -> str:
    """What to use instead of inline assembly on ``arch``: "use the intrinsics of <...>"."""
    headers = "/".join(f"<{h}>" for h in intrinsics_headers(arch))
    if not headers:
        return f"write portable C (accelopt knows no intrinsics header for {arch})"
    return f"use the intrinsics of {headers}"


def target_arch() -> str:
    """The architecture kernels are compiled for: that of ``CC`` (this machine's without one)."""
    try:
        return compiler_for(settings.c_compiler()).arch
    except CompilerNotFoundError:
        return host_arch()


def _strip(source: str) -> str:
    """Remove comments and string/char literals, keeping `#include <...>` lines intact."""

    def blank(match: re.Match[str]) -> str:
        text = match.group(0)
        return '""' if text.startswith('"') else " "

    return _COMMENT_OR_LITERAL.sub(blank, source)


def _check_includes(source: str, arch: str | None) -> str | None:
    for match in _INCLUDE.finditer(source):
        header = match.group(1) or match.group(2) or match.group(3) or ""
        if header not in ACCEPTED_HEADERS:
            target = arch or target_arch()
            allowed = ", ".join(f"<{h}>" for h in allowed_headers(target))
            return (
                f"#include of {header or 'a macro'!r} is not allowed; allowed headers "
                f"({target}): {allowed}"
            )
    return None


def _check_identifiers(code: str, arch: str | None) -> str | None:
    for spelled, call in _IDENTIFIER.findall(code):
        name = spelled.removeprefix("__builtin_")  # __builtin_fork is fork
        if name in _ASM:
            advice = intrinsics_advice(arch or target_arch())
            return f"inline assembly ({name}) is not allowed; {advice}"
        if name in BANNED and (call or name in _DISTINCTIVE):
            return f"call to {name}() is not allowed in a kernel ({BANNED[name]})"
        if (
            name.startswith("exec")
            and call
            and name[4:] in {"l", "lp", "le", "v", "vp", "vpe", "ve"}
        ):
            return f"call to {name}() is not allowed in a kernel (process control)"
    return None


def _check_attributes(code: str) -> str | None:
    for match in _ATTRIBUTE.finditer(code):
        for name in _IDENTIFIER_ONLY.findall(match.group(1)):
            if name.strip("_") in FORBIDDEN_ATTRIBUTES:
                return f"the {name!r} attribute is not allowed: a kernel runs only when called"
    return None


def _translate(source: str) -> str:
    """What the preprocessor reads: line splices joined, the `%:` digraph spelled `#`."""
    return re.sub(r"\\\r?\n", "", source).replace("%:", "#")


def check_source(source: str, arch: str | None = None) -> str | None:
    """Return why the kernel must be rejected, or None when it may be compiled.

    ``arch`` is the target architecture the messages advise for (default: ``target_arch()``,
    looked up only to word a rejection). The built object is checked again (``symbols.py``):
    whatever spelling reaches a function, the shared object has to import it by name.
    """
    if not source.strip():
        return "the kernel source is empty"
    if "\0" in source:
        return "the kernel source contains a NUL byte"
    source = _translate(source)
    # Includes are read from the source with comments removed but quoted names kept.
    without_comments = re.sub(r"/\*.*?\*/|//[^\n]*", " ", source, flags=re.DOTALL)
    reason = _check_includes(without_comments, arch)
    if reason:
        return reason
    code = _strip(source)
    if "##" in code:
        return "token pasting (##) is not allowed: it can hide the names these checks look for"
    if re.search(r"^\s*#\s*(include_next|import|line)\b", code, re.MULTILINE):
        return "only plain #include of an allowed header is permitted"
    if re.search(r"^\s*#\s*pragma\s+(redefine_extname|weak)\b", code, re.MULTILINE):
        return "#pragma redefine_extname and #pragma weak are not allowed: they rename symbols"
    if "[[" in code:
        return "[[...]] attributes are not allowed; use __attribute__ for what is permitted"
    return _check_identifiers(code, arch) or _check_attributes(code)
