"""Static checks on an untrusted C kernel, before it reaches the compiler.

These are a first fence, not the sandbox: the worker process (limits, scratch directory, no
network) is what contains a kernel. They catch what a kernel has no business doing, with a reason
an agent can act on.
"""

from __future__ import annotations

import re

ALLOWED_HEADERS = frozenset(
    {
        "immintrin.h",
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


def _strip(source: str) -> str:
    """Remove comments and string/char literals, keeping `#include <...>` lines intact."""

    def blank(match: re.Match[str]) -> str:
        text = match.group(0)
        return '""' if text.startswith('"') else " "

    return _COMMENT_OR_LITERAL.sub(blank, source)


def _check_includes(source: str) -> str | None:
    for match in _INCLUDE.finditer(source):
        header = match.group(1) or match.group(2) or match.group(3) or ""
        if header not in ALLOWED_HEADERS:
            allowed = ", ".join(f"<{h}>" for h in sorted(ALLOWED_HEADERS))
            return f"#include of {header or 'a macro'!r} is not allowed; allowed headers: {allowed}"
    return None


def _check_identifiers(code: str) -> str | None:
    for spelled, call in _IDENTIFIER.findall(code):
        name = spelled.removeprefix("__builtin_")  # __builtin_fork is fork
        if name in _ASM:
            return f"inline assembly ({name}) is not allowed; use intrinsics from <immintrin.h>"
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


def check_source(source: str) -> str | None:
    """Return why the kernel must be rejected, or None when it may be compiled.

    The built object is checked again (``symbols.py``): whatever spelling reaches a function, the
    shared object has to import it by name.
    """
    if not source.strip():
        return "the kernel source is empty"
    if "\0" in source:
        return "the kernel source contains a NUL byte"
    source = _translate(source)
    # Includes are read from the source with comments removed but quoted names kept.
    without_comments = re.sub(r"/\*.*?\*/|//[^\n]*", " ", source, flags=re.DOTALL)
    reason = _check_includes(without_comments)
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
    return _check_identifiers(code) or _check_attributes(code)
