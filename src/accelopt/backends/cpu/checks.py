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

Time. These checks run in the parent process, on text an LLM wrote: every pass is linear in the
length of the source (comments and literals in one left-to-right scan, directives line by line,
attributes with a token scanner that keeps a stack of parentheses), and a source over
``MAX_SOURCE_BYTES`` is rejected before any of them.

Macros. The text checks see what the kernel spells, not what its macros expand to. The compiler's
``-E`` output is checked again at the build (``check_preprocessed_output``, run by
``compiler.check_preprocessed``) for load-time attributes, assembly, renaming pragmas and nested
functions, on the kernel's own lines only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from accelopt import settings
from accelopt.errors import CompilerNotFoundError
from accelopt.hardware.toolchain import compiler_for, host_arch, normal_arch

MAX_SOURCE_BYTES = 1 << 20  # 1 MiB: kernels are a few KiB; a larger source is a bug or an attack

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

# Names that are never innocent: banned wherever they appear (a function pointer is as bad as a
# call). The others (read, write, open, signal, ...) are common words and banned only as calls.
_DISTINCTIVE = _PROCESS | {
    "socket", "socketpair", "getaddrinfo", "gethostbyname", "sigaction", "sigprocmask",
    "fopen", "freopen", "fdopen", "tmpfile", "mmap", "mprotect", "environ", "__environ",
}  # fmt: skip
_ASM = {"asm", "__asm__", "__asm"}
# Why each attribute is refused; it is refused in any spelling: __attribute__((__alias__)),
# __attribute ((alias)), [[gnu::alias]], and through macros (on the preprocessed kernel).
_ATTRIBUTE_WHY = {
    "constructor": "a kernel runs only when called",
    "destructor": "a kernel runs only when called",
    "ifunc": "its resolver would run when the object is loaded",
    "target_clones": "its resolver would run when the object is loaded",
    "alias": "it makes one symbol stand for another",
    "weakref": "it makes one symbol stand for another",
    "symver": "it makes one symbol stand for another",
    "copy": "it copies the attributes of another declaration",
    "section": "it places code or data where the loader would run or execute it",
    "naked": "a naked function is a body of assembly",
}
FORBIDDEN_ATTRIBUTES = frozenset(_ATTRIBUTE_WHY)
_ATTRIBUTE_KEYWORDS = frozenset({"__attribute__", "__attribute"})
_RAW_STRING = (
    'raw string literals (R"(...)") are not allowed: they span lines that the checks could not '
    "tell from code"
)
_RENAMING_PRAGMA = "#pragma redefine_extname and #pragma weak are not allowed: they rename symbols"
_BRACKET_ATTRIBUTE = "[[...]] attributes are not allowed; use __attribute__ for what is permitted"
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
# The tokens the attribute scan needs (identifiers, numbers so that 0x1f is no name, brackets of
# every kind with their digraphs); ``_EVERY_TOKEN`` adds each other character as one token.
_TOKEN = re.compile(r"[A-Za-z_$][\w$]*|\.?\d(?:[eEpP][+-]|[\w.$])*|<:|:>|<%|%>|[()\[\]{}]")
_EVERY_TOKEN = re.compile(_TOKEN.pattern + r"|\S")
_LINEMARKER = re.compile(r'# \d+ "(?P<file>(?:[^"\\\n]|\\.)*)"(?P<flags>(?: \d+)*)[ \t]*')
# Words that may stand before `( ... ) {` inside a function body without making it a function
# definition: `if (x) {`, `return (struct s){...}`, `sizeof (T){...}`.
_NOT_A_FUNCTION = frozenset(
    {
        "if", "for", "while", "switch", "return", "sizeof", "else", "do", "case", "goto",
        "_Alignof", "__alignof__", "__alignof", "alignof", "typeof", "__typeof__", "__typeof",
        "_Generic", "__extension__", "__real__", "__imag__", "_Static_assert", "static_assert",
    }
)  # fmt: skip


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


_ATTRIBUTE_PAREN = "(__attribute__"  # what the stack holds for an attribute's outer "("


@dataclass
class _Scanner:
    """One pass over C tokens with stacks for parentheses and brackets (linear time, one tight
    loop), for what only the token structure shows: the names inside ``__attribute__((...))``
    and ``[[...]]``, and (``nested``) a function defined inside a function body.
    ``brackets_allowed=False`` refuses every ``[[`` (the source check); the check of the
    preprocessed kernel reads the names inside instead. ``scan`` may be called line by line."""

    nested: bool = False
    brackets_allowed: bool = True
    # The token before each open "(" (a name makes it a call or a declarator), or
    # _ATTRIBUTE_PAREN for the outer one of an attribute; for those, the (prev, closed) state
    # before the keyword, restored when it closes: `f(int x) __attribute__((...)) {` is `f(...) {`.
    parens: list[str] = field(default_factory=list)
    restores: list[tuple[str, str]] = field(default_factory=list)
    brackets: list[bool] = field(default_factory=list)  # True: the second `[` of a `[[`
    state: tuple[int, int, str, str, tuple[str, str]] = (0, 0, "", "", ("", ""))

    def scan(self, code: str, every_token: bool = False) -> str | None:
        """Feed the tokens of ``code``; the reason to reject, or None. One loop with the state
        in local variables: a call per token would make a 1 MiB source take seconds."""
        parens, restores, brackets = self.parens, self.restores, self.brackets
        # open braces, open attribute regions, the previous token, when it is ")" the token
        # before its "(", and (prev, closed) before the last __attribute__ keyword
        braces, attributes, prev, closed, saved = self.state
        for token in (_EVERY_TOKEN if every_token else _TOKEN).findall(code):
            if token == "(":
                if prev in _ATTRIBUTE_KEYWORDS:
                    parens.append(_ATTRIBUTE_PAREN)
                    restores.append(saved)
                    attributes += 1
                else:
                    parens.append(prev)
            elif token == ")":
                before = parens.pop() if parens else ""
                if before is _ATTRIBUTE_PAREN:
                    attributes -= 1
                    prev, closed = restores.pop()
                else:
                    prev, closed = ")", before
                continue
            elif token in _OPEN_BRACKETS:
                attribute = prev in _OPEN_BRACKETS
                brackets.append(attribute)
                attributes += attribute
                if attribute and not self.brackets_allowed:
                    return _BRACKET_ATTRIBUTE
            elif token in _CLOSE_BRACKETS:
                if brackets and brackets.pop():
                    attributes -= 1
            elif token in _OPEN_BRACES:
                if self.nested and braces and prev == ")" and _defines_a_function(closed):
                    return _nested_function(closed)
                braces += 1
            elif token in _CLOSE_BRACES:
                braces = max(0, braces - 1)
            elif token in _ATTRIBUTE_KEYWORDS:
                saved = (prev, closed)
            elif attributes and token.strip("_") in FORBIDDEN_ATTRIBUTES:
                return f"the {token!r} attribute is not allowed: {_ATTRIBUTE_WHY[token.strip('_')]}"
            prev = token
        self.state = (braces, attributes, prev, closed, saved)
        return None


_OPEN_BRACKETS = frozenset({"[", "<:"})
_CLOSE_BRACKETS = frozenset({"]", ":>"})
_OPEN_BRACES = frozenset({"{", "<%"})
_CLOSE_BRACES = frozenset({"}", "%>"})


def _defines_a_function(name: str) -> bool:
    """Whether `name ( ... ) {` inside braces is a function definition: a name, not a keyword."""
    return bool(name) and (name[0].isalpha() or name[0] in "_$") and name not in _NOT_A_FUNCTION


def _nested_function(name: str) -> str:
    return (
        f"a function defined inside another function ({name}) is not allowed: define it at "
        "file scope (a nested function can need an executable stack)"
    )


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
        or _Scanner(brackets_allowed=False).scan(lexed.code)
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
    scanner = _Scanner(nested=True)
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


def _check_preprocessed_line(line: str, scanner: _Scanner, arch: str | None) -> str | None:
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
