"""Static checks on C kernels: what a kernel may include and call, with a reason an agent can act
on, and no false alarms on ordinary code."""

from __future__ import annotations

import time

import pytest

from accelopt.backends.cpu.backend import CpuBackend
from accelopt.backends.cpu.checks import MAX_SOURCE_BYTES, check_preprocessed_output, check_source
from accelopt.backends.cpu.compiler import (
    LIBS,
    BuildInputs,
    check_preprocessed,
    compile_kernel,
    kernel_flags,
    prototype,
)
from accelopt.backends.cpu.compiler_process import run_compiler
from accelopt.backends.cpu.headers import (
    ACCEPTED_HEADERS,
    COMMON_HEADERS,
    allowed_headers,
    intrinsics_headers,
)
from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
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
def test_allowed_headers_are_the_common_ones_and_the_targets_intrinsics(
    headers_for, arch, mine, other
):
    assert set(allowed_headers(arch)) == headers_for(arch)
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
        BuildInputs(GUARDED, {"M": 4, "N": 4}, prototype(1, 1), cc), tmp_path, tmp_path / "so", 60
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
            BuildInputs(source, {"M": 4, "N": 4}, prototype(1, 1), cc),
            tmp_path,
            tmp_path / "so",
            60,
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
    source = shipped_kernel(load_problem(name), "baseline").read_text()
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
        '__attribute ((__section__(".text")))',
        '__attribute__((ifunc("resolve")))',
        '__attribute__((alias("kernel")))',
        '__attribute__((symver("init@V1")))',
        "__attribute__((naked))",
        '__attribute__((target_clones("avx2", "default")))',
        "__attribute__((copy(kernel)))",
        "__attribute__((aligned(__alignof__(float)), constructor))",
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


def plain_compile(source: str, cc, tmp_path) -> tuple[int, str]:
    """The contract's compiler and flags, without the checks ``compile_kernel`` makes."""
    (tmp_path / "kernel.c").write_text(source)
    (tmp_path / "contract.h").write_text(prototype(1, 1))
    cmd = [*cc.command, *kernel_flags(cc), "-include", "contract.h", "-DM=4", "-DN=4"]
    return run_compiler([*cmd, "-o", "kernel.so", "kernel.c", *LIBS], 60, cwd=tmp_path)


@pytest.mark.parametrize("source", BYPASSES.values(), ids=BYPASSES.keys())
def test_bypasses_compile(source, cc, tmp_path):
    """The control for the test above: each bypass is C that the contract's compiler accepts."""
    code, output = plain_compile(source, cc, tmp_path)
    assert code == 0, output


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


# -- time and size: the checks run in the parent process, on hostile text --------------------------

# Each 1 MB pattern takes 0.1-0.5 s here; the regexes these checks used before took minutes on
# some (a lazy `.*?` retried from every `__attribute__((`, `^\s*` from every line).
LINEAR_BOUND_S = 2.0
PATTERNS = {
    "attribute openings in #if 0": "__attribute__((",
    "attribute openings on lines": "__attribute__((\n",
    "comment openings": "/*",
    "quotes": '"',
    "unterminated strings": '"a',
    "unterminated characters": "'a",
    "parentheses": "(",
    "calls": "a(",
    "blank lines": "\n",
    "directive lines": "\n#",
    "brackets": "a[",
    "backslashes and blanks": "\\ ",
}


@pytest.mark.parametrize("unit", PATTERNS.values(), ids=PATTERNS.keys())
def test_a_megabyte_of_a_pattern_is_checked_in_linear_time(unit):
    source = "#if 0\n" + unit * (1_000_000 // len(unit)) + "\n#endif\n" + body("")
    assert len(source.encode()) <= MAX_SOURCE_BYTES
    start = time.perf_counter()
    check_source(source)
    assert time.perf_counter() - start < LINEAR_BOUND_S


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (int(1.2 * MAX_SOURCE_BYTES), "1.2 MiB"),
        (MAX_SOURCE_BYTES + 1, f"{MAX_SOURCE_BYTES + 1} bytes"),
    ],
)
def test_a_source_over_the_limit_is_rejected_first_in_one_sentence(size, shown):
    source = "#include <stdio.h>\n" + body("") + "//" + "x" * (size - len(body("")) - 21)
    assert len(source.encode()) == size
    assert check_source(source) == f"the kernel source is {shown}; the limit is 1 MiB"


def test_the_limit_counts_bytes_not_characters():
    source = body("") + "// " + "é" * (MAX_SOURCE_BYTES // 2)
    assert len(source) < MAX_SOURCE_BYTES < len(source.encode())
    assert "the limit is 1 MiB" in (check_source(source) or "")
    assert check_source(body("") + "// " + "x" * (MAX_SOURCE_BYTES - 200)) is None


def test_a_source_over_the_limit_is_rejected_by_the_build(accelopt_cache, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = body("") + "//" + "x" * (32 << 20)
    built = CpuBackend().build(Kernel(source), load_problem("silu"), {"M": 4, "N": 4}, 60)
    assert built.status is Status.REJECTED and "the limit is 1 MiB" in built.error


# -- how the preprocessor reads the text: lines, splices, literals ---------------------------------

# Each of these compiles, and each got past the checks as they were: the text they read was not
# the preprocessor's.
READING_BYPASSES = {
    "a lone CR ends a line": "int a;\r#include <unistd.h>\n" + body(""),
    "a backslash, blanks, then a newline splice": "#inc\\ \nlude <unistd.h>\n" + body(""),
    "a raw string hides a comment opening": 'const char *s = R"(" /* )";\n#include <unistd.h>\n'
    "/* */\n" + body(""),
    "a GNU line marker": '# 1 "/usr/include/stdlib.h" 3\n' + body(""),
    "[[ with a blank between": body("") + "[ [gnu::constructor]] static void init(void) { }\n",
    "[[ as digraphs": body("") + "<:<:gnu::constructor:>:> static void init(void) { }\n",
}


@pytest.mark.parametrize("source", READING_BYPASSES.values(), ids=READING_BYPASSES.keys())
def test_reading_bypasses_are_rejected(source):
    assert check_source(source) is not None


@pytest.mark.parametrize("source", READING_BYPASSES.values(), ids=READING_BYPASSES.keys())
def test_reading_bypasses_compile(source, cc, tmp_path):
    code, output = plain_compile(source, cc, tmp_path)
    assert code == 0, output


# -- what macros spell: checked on the preprocessed kernel, at the build ---------------------------

# (source, what the rejection names). None of these is visible in the text: a macro spells the
# attribute, the pragma or the assembly, or it takes the structure of the code to see.
MACRO_BYPASSES = {
    "attribute keyword from a macro": (
        "#define A __attribute__\nA((constructor)) static void init(void) { }\n" + body(""),
        "'constructor' attribute",
    ),
    "attribute name from a macro": (
        "#define C constructor\n__attribute__((C)) static void init(void) { }\n" + body(""),
        "'constructor' attribute",
    ),
    "code placed in .text by a macro": (
        '#define S section(".text")\n__attribute__((S)) const unsigned char code[] = {0xc3};\n'
        + body(""),
        "'section' attribute",
    ),
    "ifunc from a macro": (
        '#define I ifunc("resolve")\nstatic void impl(void) { }\n'
        "static void (*resolve(void))(void) { return impl; }\nvoid f(void) __attribute__((I));\n"
        + body(""),
        "'ifunc' attribute",
    ),
    "[[ from a macro": (
        "#define L [\nL L gnu::destructor]] static void fini(void) { }\n" + body(""),
        "'destructor' attribute",
    ),
    "_Pragma weak": ('#define P _Pragma("weak kernel")\nP\n' + body(""), "#pragma weak"),
    "an asm label from glibc's __REDIRECT": (
        "#include <stdlib.h>\n__REDIRECT(my_abs, (int), abs);\n" + body(""),
        "inline assembly (__asm__)",
    ),
    "a nested function": (
        body("int twice(int a) { return 2 * a; } y[1] = (float)twice(1);"),
        "defined inside another function (twice)",
    ),
    "a nested function whose address is taken (a trampoline)": (
        body(
            "float s = x[0]; float add(float a) { return a + s; } "
            "float (*f)(float) = add; y[1] = f(1);"
        ),
        "defined inside another function (add)",
    ),
    "a nested function with an attribute": (
        body("__attribute__((noinline)) int one(void) { return 1; } y[1] = one();"),
        "defined inside another function (one)",
    ),
}


@pytest.mark.parametrize(("source", "named"), MACRO_BYPASSES.values(), ids=MACRO_BYPASSES.keys())
def test_macro_bypasses_are_rejected_at_the_build(
    source, named, accelopt_cache, cc, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    built = CpuBackend().build(Kernel(source), load_problem("silu"), {"M": 4, "N": 4}, 60)
    assert built.status is Status.REJECTED, built.error
    assert named in built.error
    assert (
        check_preprocessed(BuildInputs(source, {"M": 4, "N": 4}, prototype(1, 1), cc))
        == built.error
    )


@pytest.mark.parametrize(("source", "named"), MACRO_BYPASSES.values(), ids=MACRO_BYPASSES.keys())
def test_macro_bypasses_compile(source, named, cc, tmp_path):
    """The control: each is C that the contract's compiler accepts."""
    code, output = plain_compile(source, cc, tmp_path)
    assert code == 0, output


HARMLESS = {
    "attributes from macros": "#define ALIGNED __attribute__((aligned(64)))\n"
    "#define INLINE static inline __attribute__((always_inline, unused))\n"
    "static float table[4] ALIGNED;\nINLINE float twice(float v) { return 2 * v; }\n"
    + body("y[1] = twice(x[1]) + table[0];"),
    "a prototype with attributes, then its definition": "static int one(void) "
    "__attribute__((noinline, const));\nstatic int one(void) { return 1; }\n"
    + body("y[1] = (float)one();"),
    "compound literals and statement expressions": "typedef union { unsigned i; float f; } U;\n"
    + body(
        "y[1] = (float)(U){ .i = 0x3f800000u }.f; if (x[0] > 0) { y[1] = 1; } "
        "else if (x[0] < 0) { y[1] = -1; } "
        "y[2] = __extension__ ({ float t = x[2]; t * t; }); "
        "for (int i = 0; i < 2; i++) { switch (i) { case 0: { y[3] = 0; } } } "
        "while (0) { } do { } while (0);"
    ),
    "a returned compound literal": "typedef struct { float a, b; } P;\n"
    "static P pair(float v) { return (P){ v, v }; }\n" + body("y[1] = pair(x[0]).a;"),
    "OpenMP through _Pragma and math macros": "#include <math.h>\n#include <omp.h>\n"
    '#define PARALLEL _Pragma("omp parallel for")\n'
    + body("PARALLEL for (int i = 0; i < M; i++) { y[i] = isnan(x[i]) ? NAN : fabsf(x[i]); }"),
    "words and brackets inside strings": body(
        'const char *s = "__attribute__((constructor)) [[x]] asm int f(void) {"; (void)s;'
    ),
}


@pytest.mark.parametrize("source", HARMLESS.values(), ids=HARMLESS.keys())
def test_harmless_code_passes_the_preprocessed_check_and_builds(source, cc, tmp_path):
    assert check_source(source) is None
    built = compile_kernel(
        BuildInputs(source, {"M": 4, "N": 4}, prototype(1, 1), cc), tmp_path, tmp_path / "so", 60
    )
    assert built.ok, built.error


PREPROCESSED_HEADER = (
    '# 0 "kernel.c"\n# 0 "<built-in>"\n# 1 "/usr/include/stdlib.h" 1 3 4\n'
    'extern int abs (int) __attribute__ ((__nothrow__ , __leaf__)) __asm__ ("abs");\n'
    '# 2 "kernel.c" 2\n'
)


def test_system_header_lines_are_not_read_but_the_kernels_lines_are():
    assert check_preprocessed_output(PREPROCESSED_HEADER.splitlines(keepends=True)) is None
    # GCC marks what a system macro expands to on the kernel's line with flag 3: still read
    expanded = PREPROCESSED_HEADER + '# 3 "kernel.c" 3 4\n  __asm__ ("abs")\n# 3 "kernel.c"\n'
    reason = check_preprocessed_output(expanded.splitlines(keepends=True), "x86_64")
    assert reason is not None and "inline assembly" in reason


@pytest.mark.parametrize(
    "spoof",
    [
        '# 1 "/usr/include/stdlib.h" 3\n',
        '#line 1 "/usr/include/stdlib.h"\n',
        'R"(\n# 1 "a" 3\n)";\n',
    ],
)
def test_what_could_forge_a_line_marker_is_rejected_before_preprocessing(spoof, cc):
    source = spoof + "__attribute__((constructor)) static void init(void) { }\n" + body("")
    reason = check_preprocessed(BuildInputs(source, {"M": 4, "N": 4}, prototype(1, 1), cc))
    assert reason is not None and ("line directive" in reason or "raw string" in reason)
