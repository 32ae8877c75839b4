"""Static checks on C kernels: what a kernel may include and call, with a reason an agent can act
on, and no false alarms on ordinary code."""

from __future__ import annotations

import pytest

from accelopt.backends.cpu.backend import CpuBackend
from accelopt.backends.cpu.checks import (
    ACCEPTED_HEADERS,
    COMMON_HEADERS,
    allowed_headers,
    check_source,
    intrinsics_headers,
)
from accelopt.backends.cpu.compiler import compile_kernel, prototype
from accelopt.backends.kernel import Kernel
from accelopt.backends.status import Status
from accelopt.problems import list_problems, load_problem

SIG = "void kernel(const float *restrict x, float *restrict y)"


def body(code: str, prelude: str = "") -> str:
    """A silu-shaped kernel whose body is ``code``."""
    return f"{prelude}\n{SIG} {{\n    {code}\n    y[0] = x[0];\n}}\n"


# -- what passes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_each_allowed_header_passes(arch):
    for header in allowed_headers(arch):
        assert check_source(body("", f"#include <{header}>"), arch) is None


def test_all_allowed_headers_together_pass():
    includes = "\n".join(f"#  include <{h}>  // ok" for h in sorted(ACCEPTED_HEADERS))
    assert check_source(body("", includes)) is None


@pytest.mark.parametrize(
    ("arch", "mine", "other"),
    [("x86_64", "immintrin.h", "arm_neon.h"), ("aarch64", "arm_neon.h", "immintrin.h")],
)
def test_allowed_headers_are_the_common_ones_and_the_targets_intrinsics(arch, mine, other):
    assert set(allowed_headers(arch)) == COMMON_HEADERS | set(intrinsics_headers(arch))
    assert mine in allowed_headers(arch) and other not in allowed_headers(arch)
    assert (
        intrinsics_headers("arm64")
        == intrinsics_headers("aarch64")
        == (
            "arm_neon.h",
            "arm_sve.h",
        )
    )
    assert intrinsics_headers("AMD64") == ("immintrin.h",)
    assert intrinsics_headers("riscv64") == ()


GUARDED = """
#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>
#define LANES 8
#elif defined(__aarch64__) && defined(__ARM_FEATURE_SVE)
#include <arm_sve.h>
#define LANES 4
#elif defined(__aarch64__)
#include <arm_neon.h>
#define LANES 4
#else
#define LANES 1
#endif
#include <stddef.h>
void kernel(const float *restrict x, float *restrict y) {
    for (size_t i = 0; i < (size_t)M * N; i++) y[i] = x[i] * (float)LANES / (float)LANES;
}
"""


@pytest.mark.parametrize("arch", ["x86_64", "aarch64", "riscv64"])
def test_a_guarded_path_per_architecture_passes_on_every_target(arch):
    assert check_source(GUARDED, arch) is None


def test_a_guarded_path_per_architecture_compiles_here(cc, tmp_path):
    built = compile_kernel(
        GUARDED, {"M": 4, "N": 4}, prototype(1, 1), tmp_path, tmp_path / "so", 60, cc
    )
    assert built.ok, built.error


def test_another_architectures_header_outside_a_guard_does_not_compile(cc, tmp_path):
    """Why the checks may accept every architecture's intrinsics headers: the target's compiler
    does not build another's, so an unguarded include fails at the build, not in a worker."""
    foreign = sorted(set(ACCEPTED_HEADERS) - COMMON_HEADERS - set(intrinsics_headers(cc.arch)))
    for header in foreign:
        source = body("", f"#include <{header}>")
        assert check_source(source) is None
        built = compile_kernel(
            source, {"M": 4, "N": 4}, prototype(1, 1), tmp_path, tmp_path / "so", 60, cc
        )
        assert built.status is Status.COMPILE_ERROR, header


@pytest.mark.parametrize(
    ("arch", "listed", "unlisted"),
    [("x86_64", "<immintrin.h>", "<arm_neon.h>"), ("aarch64", "<arm_sve.h>", "<immintrin.h>")],
)
def test_a_disallowed_include_lists_the_targets_headers(arch, listed, unlisted):
    reason = check_source(body("", "#include <stdio.h>"), arch)
    assert reason is not None and f"allowed headers ({arch})" in reason
    assert listed in reason and "<math.h>" in reason and unlisted not in reason


@pytest.mark.parametrize(
    ("arch", "advice"),
    [
        ("x86_64", "use the intrinsics of <immintrin.h>"),
        ("aarch64", "use the intrinsics of <arm_neon.h>/<arm_sve.h>"),
        ("riscv64", "write portable C"),
    ],
)
def test_inline_assembly_is_rejected_with_the_targets_intrinsics(arch, advice):
    reason = check_source(body('__asm__ volatile("nop");'), arch)
    assert reason is not None and "inline assembly" in reason and advice in reason


def test_messages_default_to_the_compilers_architecture(cc):
    reason = check_source(body('asm("nop");'))
    assert reason == check_source(body('asm("nop");'), cc.arch)


@pytest.mark.parametrize("name", list_problems())
def test_shipped_baselines_pass(name):
    source = load_problem(name).kernel_path("baseline").read_text()
    assert check_source(source) is None


@pytest.mark.parametrize(
    "code",
    [
        "float read = x[0]; y[1] = read;",
        "int signal = 1; y[1] = (float)signal;",
        "float write = 2.0f, open = 1.0f, kill = 0.5f; y[1] = write + open + kill;",
        "struct { int read; } s = {1}; y[1] = (float)s.read;",
        "int executed = 0; y[1] = (float)executed;",
        "float bind_weight = 1.0f, send_count = 2.0f; y[1] = bind_weight * send_count;",
    ],
)
def test_common_words_as_variables_pass(code):
    assert check_source(body(code)) is None


@pytest.mark.parametrize(
    "code",
    [
        '/* do not call system("rm -rf /") or fork() here */',
        "// a comment about fopen(), socket() and signal(SIGINT, ...)",
        'const char *note = "system(\\"ls\\"); fork(); asm(\\"nop\\")"; (void)note;',
        "const char c = '#'; (void)c;",
        "/* token pasting ## in a comment */",
    ],
)
def test_comments_and_strings_pass(code):
    assert check_source(body(code, "#include <stddef.h>")) is None


def test_openmp_pragmas_intrinsics_and_harmless_attributes_pass():
    source = """
        #include <immintrin.h>
        #include <omp.h>
        #include <stddef.h>
        static float tmp[64] __attribute__((aligned(64)));
        static inline __attribute__((always_inline)) float twice(float v) { return 2 * v; }
        void kernel(const float *restrict x, float *restrict y) {
        #pragma omp parallel for simd
            for (size_t i = 0; i < (size_t)M * N; i++) y[i] = twice(x[i]) + tmp[i % 64];
            __m256 v = _mm256_loadu_ps(x); _mm256_storeu_ps(y, v);
            (void)omp_get_thread_num();
        }
    """
    assert check_source(source) is None


# -- what is rejected ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "include",
    [
        "#include <stdio.h>",
        "#include <unistd.h>",
        "#include <sys/socket.h>",
        "#include <dlfcn.h>",
        '#include "local.h"',
        "#include HEADER",
        "  #  include <signal.h>",
        "#include </etc/passwd>",
    ],
)
def test_disallowed_includes_are_rejected(include):
    reason = check_source(body("", include))
    assert reason is not None and "not allowed" in reason
    assert "allowed headers" in reason  # says what would be accepted


@pytest.mark.parametrize(
    ("code", "name", "category"),
    [
        ('system("true");', "system", "process control"),
        ("fork();", "fork", "process control"),
        ("vfork();", "vfork", "process control"),
        ('popen("ls", "r");', "popen", "process control"),
        ('execv("/bin/sh", 0);', "execv", "process control"),
        ('execlp("sh", "sh", 0);', "execlp", "process control"),
        ('dlopen("libc.so.6", 2);', "dlopen", "process control"),
        ("syscall(39);", "syscall", "process control"),
        ('fopen("/etc/passwd", "r");', "fopen", "file and environment access"),
        ('open("/etc/passwd", 0);', "open", "file and environment access"),
        ("read(0, y, 4);", "read", "file and environment access"),
        ("write(1, x, 4);", "write", "file and environment access"),
        ('unlink("/tmp/x");', "unlink", "file and environment access"),
        ('getenv("HOME");', "getenv", "file and environment access"),
        ("mmap(0, 4096, 3, 34, -1, 0);", "mmap", "file and environment access"),
        ("socket(2, 1, 0);", "socket", "network access"),
        ("connect(3, 0, 0);", "connect", "network access"),
        ('getaddrinfo("example.com", 0, 0, 0);', "getaddrinfo", "network access"),
        ("signal(11, 0);", "signal", "signal handling"),
        ("raise(9);", "raise", "signal handling"),
        ("kill(0, 9);", "kill", "signal handling"),
        ("sigaction(11, 0, 0);", "sigaction", "signal handling"),
        ("longjmp(0, 1);", "longjmp", "signal handling"),
    ],
)
def test_banned_calls_are_rejected_with_their_category(code, name, category):
    reason = check_source(body(code))
    assert reason is not None
    assert f"{name}()" in reason and category in reason


@pytest.mark.parametrize(
    "code",
    [
        "void *p = (void *)fork; (void)p;",
        "int (*run)(const char *) = system; (void)run;",
        "void *s = (void *)socket; (void)s;",
        "void *m = (void *)mmap; (void)m;",
    ],
)
def test_distinctive_names_are_rejected_even_without_a_call(code):
    assert check_source(body(code)) is not None


def test_read_as_a_call_is_rejected_but_not_as_a_name():
    assert check_source(body("float read = 1; y[1] = read;")) is None
    assert check_source(body("read (0, y, 4);")) is not None  # a space before ( is still a call


@pytest.mark.parametrize("asm", ['asm("nop");', '__asm__ volatile("nop");', '__asm("nop");'])
def test_inline_assembly_is_rejected(asm):
    reason = check_source(body(asm))
    assert reason is not None and "inline assembly" in reason


@pytest.mark.parametrize(
    "attribute",
    [
        "__attribute__((constructor))",
        "__attribute__((destructor))",
        "__attribute__((__constructor__))",
        "__attribute__((constructor(101)))",
        "__attribute__((used, constructor))",
        '__attribute__((section(".init_array")))',
    ],
)
def test_load_time_attributes_are_rejected(attribute):
    source = body("") + f"\nstatic void {attribute} init(void) {{ }}\n"
    reason = check_source(source)
    assert reason is not None and "attribute" in reason


def test_token_pasting_is_rejected():
    source = body("J(sys, tem)(0);", "#define J(a, b) a##b")
    reason = check_source(source)
    assert reason is not None and "##" in reason


@pytest.mark.parametrize(
    "directive", ["#include_next <math.h>", '#line 1 "other.c"', "#import <math.h>"]
)
def test_other_include_like_directives_are_rejected(directive):
    assert check_source(body("", directive)) is not None


@pytest.mark.parametrize("source", ["", "   \n\t\n", "void kernel(void) {}\0"])
def test_empty_or_nul_sources_are_rejected(source):
    assert check_source(source) is not None


def test_backend_check_is_check_source():
    assert CpuBackend().check(body('system("x");')) == check_source(body('system("x");'))
    assert CpuBackend().check(body("")) is None


# -- ways past the checks (src bugs: each compiles, and does what its name says) -------------------

BYPASSES = {
    "line splice inside a name": body('sys\\\ntem("true");', "#include <stdlib.h>"),
    "line splice inside #include": body("", "#inc\\\nlude <unistd.h>"),
    "line splice inside __asm__": body('__as\\\nm__ volatile("nop");'),
    "digraph %: for #include": body("", "%:include <unistd.h>"),
    "digraph %:%: for token pasting": body('J(sys, tem)("true");', "#define J(a, b) a %:%: b"),
    "parenthesized name, no call syntax": body(
        '(write)(1, "hi", 2);', "int (write)(int, const void *, unsigned long);"
    ),
    "function pointer to a common name": body(
        'wfn *w = write; w(1, "hi", 2);',
        "typedef long wfn(int, const void *, unsigned long);\nextern wfn write;",
    ),
    "call through a macro": body(
        'CALL(unlink, "/nonexistent");',
        "#define CALL(f, ...) f (__VA_ARGS__)\nint (unlink)(const char *);",
    ),
    "GCC builtin of a banned function": body("__builtin_fork();"),
    "attribute with a space between the parentheses": body("")
    + "\n__attribute__ ( (constructor) ) static void init(void) { }\n",
    "C2x attribute syntax": body("") + "\n[[gnu::constructor]] static void init(void) { }\n",
    "#pragma redefine_extname": body(
        'my_write(1, "hi", 2);',
        "#pragma redefine_extname my_write write\nlong my_write(int, const void *, unsigned long);",
    ),
    "environ": body("(void)environ[0];", "extern char **environ;"),
}


@pytest.mark.parametrize("source", BYPASSES.values(), ids=BYPASSES.keys())
def test_bypasses_are_rejected(source, accelopt_cache, cc, tmp_path, monkeypatch):
    # At the build, so that a fix either in the text checks or on the built object (an allow-list
    # of the symbols it imports) makes these pass.
    monkeypatch.chdir(tmp_path)  # the backend writes kernel.c into the working directory
    silu = load_problem("silu")
    built = CpuBackend().build(Kernel(source), silu, {"M": 4, "N": 4}, timeout_s=60)
    assert built.status is Status.REJECTED, built.error


@pytest.mark.parametrize("source", BYPASSES.values(), ids=BYPASSES.keys())
def test_bypasses_compile(source, cc, tmp_path):
    """The control for the test above: each bypass is C that the contract's compiler accepts."""
    built = compile_kernel(
        source, {"M": 4, "N": 4}, prototype(1, 1), tmp_path, tmp_path / "so", 60, cc
    )
    assert built.ok, built.error


def test_symbol_check_names_the_function(accelopt_cache, cc, tmp_path, monkeypatch):
    """A call the text checks cannot see (through a function pointer) is caught on the object."""
    monkeypatch.chdir(tmp_path)
    source = body(
        'wfn *w = write; w(1, "hi", 2);',
        "typedef long wfn(int, const void *, unsigned long);\nextern wfn write;",
    )
    assert check_source(source) is None  # the text alone looks harmless
    built = CpuBackend().build(Kernel(source), load_problem("silu"), {"M": 4, "N": 4}, 60)
    assert built.status is Status.REJECTED
    assert "write" in built.error and "may not use" in built.error
