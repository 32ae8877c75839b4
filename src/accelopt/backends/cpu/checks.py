"""Static checks on an untrusted C kernel, before it reaches the compiler.

These are a first fence, not the sandbox: the worker process (limits, scratch directory, no
network) is what contains a kernel. They catch what a kernel has no business doing, with a reason
an agent can act on. What a kernel may include is ``headers.py``'s.

Time. These checks run in the parent process, on text an LLM wrote: every pass is linear in the
length of the source (comments and literals in one left-to-right scan, directives line by line,
attributes with a token scanner that keeps a stack of parentheses: ``token_scan.py``), and a
source over ``MAX_SOURCE_BYTES`` is rejected before any of them.

Macros. The text checks see what the kernel spells, not what its macros expand to. The compiler's
``-E`` output is checked again at the build (``check_preprocessed_output``, run by
``compiler.check_preprocessed``) for load-time attributes, assembly, renaming pragmas and nested
functions, on the kernel's own lines only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from accelopt.backends.cpu.headers import (
    ACCEPTED_HEADERS,
    allowed_headers,
    intrinsics_advice,
    target_arch,
)
from accelopt.backends.cpu.token_scan import TokenScanner

MAX_SOURCE_BYTES = 1 << 20  # 1 MiB: kernels are a few KiB; a larger source is a bug or an attack

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

# Names that are never innocent: banned wherever they appear (a function pointer is as bad as a
# call). The others (read, write, open, signal, ...) are common words and banned only as calls.
_DISTINCTIVE = _PROCESS | {
    "socket", "socketpair", "getaddrinfo", "gethostbyname", "sigaction", "sigprocmask",
    "fopen", "freopen", "fdopen", "tmpfile", "mmap", "mprotect", "environ", "__environ",
}  # fmt: skip
_ASM = {"asm", "__asm__", "__asm"}
_RAW_STRING = (
    'raw string literals (R"(...)") are not allowed: they span lines that the checks could not '
    "tell from code"
)
_RENAMING_PRAGMA = "#pragma redefine_extname and #pragma weak are not allowed: they rename symbols"
_BLANKS = " \t\f\v"
# GCC's newlines are LF, CR LF and a lone CR; a backslash then blanks then a newline is a splice.
_SPLICE = re.compile(r"\\[ \t\f\v]*\n")
# Comments and literals, each matched to its end or, unterminated, to the end of its line (the
# end of the source for a comment): every match succeeds once started, so a scan is linear.
_LITERAL = re.compile(
    r"""(?P<raw>(?<![\w$])(?:u8|[uUL])?R")
      | (?P<comment>/\*.*?(?:\*/|\Z))
      | (?P<line>//[^\n]*)
      | (?P<string>"[^"\\\n]*(?:\\.[^"\\\n]*)*"?)
      | (?P<char>'[^'\\\n]*(?:\\.[^'\\\n]*)*'?)""",
    re.DOTALL | re.VERBOSE,
)
_INCLUDE = re.compile(
    r"[ \t\f\v]*#[ \t\f\v]*include(?![\w$])[ \t\f\v]*(?:<([^>\n]*)>|\"([^\"\n]*)\"|(\S+))?"
)
_NAME = re.compile(r"\b[A-Za-z_]\w*")
_EXEC_SUFFIXES = frozenset({"l", "lp", "le", "v", "vp", "vpe", "ve"})
_WORD = re.compile(r"[A-Za-z_]\w*|\d")
_LINEMARKER = re.compile(r'# \d+ "(?P<file>(?:[^"\\\n]|\\.)*)"(?P<flags>(?: \d+)*)[ \t]*')


@dataclass(frozen=True)
class _Lexed:
    """The source with comments blanked (``text``), and with string and character literals
    blanked too (``code``); newlines are kept, so that lines stay lines."""

    text: str
    code: str
    raw_string: bool = False


def _lex(source: str) -> _Lexed:
    """Blank comments and literals in one left-to-right pass, as the preprocessor reads them."""
    text: list[str] = []
    code: list[str] = []
    pos = 0
    for match in _LITERAL.finditer(source):
        kind, literal = match.lastgroup, match.group()
        if kind == "raw":
            return _Lexed("", "", raw_string=True)
        before = source[pos : match.start()]
        pos = match.end()
        if kind in ("comment", "line"):
            blank = " " + "\n" * literal.count("\n")
            text += (before, blank)
            code += (before, blank)
        else:
            text += (before, literal)
            code += (before, '""' if kind == "string" else " ")
    text.append(source[pos:])
    code.append(source[pos:])
    return _Lexed("".join(text), "".join(code))


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:.1f}".removesuffix(".0") + " MiB"


def _check_size(source: str) -> str | None:
    size = len(source.encode("utf-8", "surrogatepass"))
    if size <= MAX_SOURCE_BYTES:
        return None
    limit = _mib(MAX_SOURCE_BYTES)
    shown = _mib(size) if _mib(size) != limit else f"{size} bytes"
    return f"the kernel source is {shown}; the limit is {limit}"


def _check_includes(text: str, arch: str | None) -> str | None:
    for line in text.split("\n"):
        match = _INCLUDE.match(line)
        if not match:
            continue
        header = match.group(1) or match.group(2) or match.group(3) or ""
        if header not in ACCEPTED_HEADERS:
            target = arch or target_arch()
            allowed = ", ".join(f"<{h}>" for h in allowed_headers(target))
            return (
                f"#include of {header or 'a macro'!r} is not allowed; allowed headers "
                f"({target}): {allowed}"
            )
    return None


def _directives(code: str) -> Iterator[tuple[str, str]]:
    """Each directive of ``code``: its name (``include``, ``pragma``, a digit for a GNU line
    marker, "" for a null directive) and the text after the name."""
    for line in code.split("\n"):
        stripped = line.lstrip(_BLANKS)
        if stripped.startswith("#"):
            rest = stripped[1:].lstrip(_BLANKS)
            word = _WORD.match(rest)
            name = word.group() if word else ""
            yield name, rest[len(name) :]


def _check_directives(code: str) -> str | None:
    for name, rest in _directives(code):
        if name in ("include_next", "import"):
            return "only plain #include of an allowed header is permitted"
        if name == "line" or name.isdigit():
            return (
                "line directives (#line, # <number>) are not allowed: they change which file "
                "the compiler thinks the code comes from"
            )
        if name == "pragma" and rest.split(None, 1)[:1] in (["weak"], ["redefine_extname"]):
            return _RENAMING_PRAGMA
    return None


def _check_identifiers(code: str, arch: str | None) -> str | None:
    # Names are collected at C speed; only those that could be refused are looked at one by one.
    suspects = {name for name in set(_NAME.findall(code)) if _suspect(name)}
    if not suspects:
        return None
    names = "|".join(sorted(suspects))
    for spelled, call in re.findall(rf"\b({names})\b(\s*\()?", code):
        name = spelled.removeprefix("__builtin_")  # __builtin_fork is fork
        if name in _ASM:
            return _inline_assembly(name, arch)
        if name in BANNED and (call or name in _DISTINCTIVE):
            return f"call to {name}() is not allowed in a kernel ({BANNED[name]})"
        if name.startswith("exec") and call and name[4:] in _EXEC_SUFFIXES:
            return f"call to {name}() is not allowed in a kernel (process control)"
    return None


def _suspect(spelled: str) -> bool:
    name = spelled.removeprefix("__builtin_")
    return name in _ASM or name in BANNED or name.startswith("exec")


def _inline_assembly(name: str, arch: str | None) -> str:
    return f"inline assembly ({name}) is not allowed; {intrinsics_advice(arch or target_arch())}"


def _translate(source: str) -> str:
    """What the preprocessor reads: GCC's newlines (CR LF, a lone CR) made LF, line splices
    joined (GCC also joins a backslash and a newline with blanks between), the `%:` digraph
    spelled `#`."""
    source = source.replace("\r\n", "\n").replace("\r", "\n")
    return _SPLICE.sub("", source).replace("%:", "#")


def check_source(source: str, arch: str | None = None) -> str | None:
    """Return why the kernel must be rejected, or None when it may be compiled.

    ``arch`` is the target architecture the messages advise for (default: ``target_arch()``,
    looked up only to word a rejection). The built object is checked again (``symbols.py``):
    whatever spelling reaches a function, the shared object has to import it by name.
    Linear in the length of the source, which is at most ``MAX_SOURCE_BYTES``.
    """
    reason = _check_size(source)
    if reason:
        return reason
    if not source.strip():
        return "the kernel source is empty"
    if "\0" in source:
        return "the kernel source contains a NUL byte"
    lexed = _lex(_translate(source))
    if lexed.raw_string:
        return _RAW_STRING
    # Includes are read with comments removed but quoted names kept.
    reason = _check_includes(lexed.text, arch)
    if reason:
        return reason
    if "##" in lexed.code:
        return "token pasting (##) is not allowed: it can hide the names these checks look for"
    return (
        _check_directives(lexed.code)
        or _check_identifiers(lexed.code, arch)
        or TokenScanner(brackets_allowed=False).scan(lexed.code)
    )


def check_before_preprocessing(source: str) -> str | None:
    """What ``check_preprocessed_output`` relies on, checked on the source: its size, and no
    line directive or raw string, the two ways a kernel could write a line that reads as the
    preprocessor's own ``# <line> "<file>"`` marker. Linear, like ``check_source``."""
    reason = _check_size(source)
    if reason:
        return reason
    lexed = _lex(_translate(source))
    if lexed.raw_string:
        return _RAW_STRING
    for name, _ in _directives(lexed.code):
        if name == "line" or name.isdigit():
            return "line directives (#line, # <number>) are not allowed"
    return None


def check_preprocessed_output(lines: Iterable[str], arch: str | None = None) -> str | None:
    """Why the preprocessed kernel (the compiler's ``-E`` output, line by line) must be
    rejected, or None: forbidden attributes however spelled, assembly (``asm``, ``__asm__``:
    glibc's ``__REDIRECT`` spells one), ``#pragma weak`` / ``redefine_extname`` (``_Pragma``
    too) and GNU nested functions, with every macro expanded.

    The lines of system headers are skipped (they legitimately use attributes and asm labels):
    those of a file that the preprocessor entered with flags 1 and 3 in its ``# <line> "<file>"``
    markers. Every other line is read, the kernel's own included, with what system macros
    expand to there (GCC marks those tokens with flag 3 too, but they are the kernel's doing).
    A kernel cannot forge a marker: a line directive or a raw string is refused in the source
    first (``check_before_preprocessing``), and a ``#`` that a macro puts at the start of a line
    is a stray ``#`` that the compiler refuses, so such a kernel never builds.

    Nested functions are found here by their shape (``name(...) {`` inside braces) to give a
    clear reason; the safety net is the object check (``objects.py``), which refuses an
    executable stack, the only thing a nested function's trampoline could gain.
    """
    scanner = TokenScanner(nested=True)
    system_headers: set[str] = set()
    system = False
    for line in lines:
        if line.startswith("#"):
            marker = _LINEMARKER.fullmatch(line.rstrip("\r\n"))
            if marker:
                flags = marker["flags"].split()
                if "1" in flags and "3" in flags:
                    system_headers.add(marker["file"])
                system = marker["file"] in system_headers
                continue
        if system:
            continue
        reason = _check_preprocessed_line(line, scanner, arch)
        if reason:
            return reason
    return None


def _check_preprocessed_line(line: str, scanner: TokenScanner, arch: str | None) -> str | None:
    if line.startswith("#"):
        words = line[1:].split(None, 2)
        if words[:1] == ["pragma"]:
            return _RENAMING_PRAGMA if words[1:2] in (["weak"], ["redefine_extname"]) else None
        if words[:1] in (["ident"], ["sccs"]):
            return None
    lexed = _lex(line)
    if lexed.raw_string:
        return _RAW_STRING
    asm = _ASM.intersection(_NAME.findall(lexed.code))
    if asm:
        return _inline_assembly(min(asm), arch)
    return scanner.scan(lexed.code, every_token=True)
