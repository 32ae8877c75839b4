"""The cpu backend on ARM (aarch64), exercised here with Debian's cross compiler
(``aarch64-linux-gnu-gcc``) through accelopt's own code paths: ``CC`` names it,
``ACCELOPT_CPU_TARGET`` picks the CPU (Cortex-A72: NEON only; Neoverse V1: NEON and SVE).

Checked: the ISA the facts report, the micro-benchmarks build, every shipped C kernel passes the
checks and builds with the backend, the symbol check reads the aarch64 object, and, where
``qemu-aarch64`` (Debian qemu-user) is installed, the kernels and micro-benchmarks run and the
kernels match the NumPy reference.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from accelopt import settings
from accelopt.backends.cpu import symbols
from accelopt.backends.cpu.backend import CpuBackend
from accelopt.backends.cpu.checks import check_source
from accelopt.backends.cpu.compiler import prototype
from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status
from accelopt.hardware import measure
from accelopt.hardware.isa import detect_isa
from accelopt.hardware.spec import HardwareSpec
from accelopt.hardware.toolchain import Compiler, compiler_for, host_arch
from accelopt.problems import list_problems, load_problem
from accelopt.problems.records import Problem
from accelopt.profiling.worker.correctness import rel_l2_error

CROSS_CC = "aarch64-linux-gnu-gcc"
QEMU = "qemu-aarch64"
SYSROOT = "/usr/aarch64-linux-gnu"
EM_AARCH64 = 183  # ELF e_machine
TARGETS = {"cortex-a72": ("neon", "fma"), "neoverse-v1": ("neon", "fma", "sve")}
SHIPPED = [
    (name, kind)
    for name in list_problems()
    for kind in ("baseline", "expert")
    if shipped_kernel(load_problem(name), kind).is_file()
]
BUILD_TIMEOUT_S = 120
RUN_TIMEOUT_S = 60

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which(CROSS_CC) is None,
        reason=f"{CROSS_CC} is not installed (Debian: apt-get install gcc-aarch64-linux-gnu)",
    ),
]
needs_qemu = pytest.mark.skipif(
    shutil.which(QEMU) is None,
    reason=f"{QEMU} is not installed (Debian: apt-get install qemu-user): nothing runs on aarch64",
)


@pytest.fixture(params=sorted(TARGETS))
def target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The -mcpu target kernels are built for; CC names the cross compiler meanwhile."""
    monkeypatch.setenv("CC", CROSS_CC)
    monkeypatch.setenv("ACCELOPT_CPU_TARGET", request.param)
    return request.param


@pytest.fixture
def arm_cc(target: str) -> Compiler:
    return compiler_for(settings.c_compiler())


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, accelopt_cache: Path) -> Path:
    monkeypatch.chdir(tmp_path)  # the backend writes kernel.c into the working directory
    return tmp_path


def elf_machine(path: Path) -> int:
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF", f"{path.name} is not an ELF file"
    return int.from_bytes(head[18:20], "little")


def small_sizes(problem: Problem) -> dict[str, int]:
    sizes = problem.workload("small").sizes
    return {p: int(sizes[p]) for p in problem.params}


def build_shipped(name: str, kind: str) -> tuple[Problem, Path]:
    """The shipped kernel built by the backend for the small workload (REJECTED or
    COMPILE_ERROR fail the test with the backend's message)."""
    problem = load_problem(name)
    kernel = Kernel(shipped_kernel(problem, kind).read_text())
    built = CpuBackend().build(kernel, problem, small_sizes(problem), BUILD_TIMEOUT_S)
    assert built.ok and built.artifact is not None, f"{name}/{kind}.c: {built.error}"
    return problem, built.artifact


def qemu(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    return subprocess.run(
        [QEMU, "-L", SYSROOT, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=env,
        check=False,
    )


# -- the toolchain: compiler, ISA, facts --------------------------------------------------------


def test_the_cross_compiler_is_seen_as_aarch64(arm_cc: Compiler):
    assert arm_cc.arch == "aarch64" and arm_cc.machine.startswith("aarch64")
    assert arm_cc.cross == (host_arch() not in ("aarch64", "arm64"))
    cross_nm = arm_cc.cross and shutil.which("aarch64-linux-gnu-nm")
    assert symbols.nm_for(arm_cc) == ("aarch64-linux-gnu-nm" if cross_nm else "nm")


def test_detect_isa_reports_neon_and_sve_by_target(arm_cc: Compiler, target: str):
    isa = detect_isa(arm_cc)
    assert isa.arch == "aarch64" and isa.flags == (f"-mcpu={target}",)
    assert set(TARGETS[target]) <= set(isa.features)
    assert ("sve" in isa.features) == (target == "neoverse-v1")
    assert isa.vector_bits >= 128


def test_an_architecture_target_uses_march(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CC", CROSS_CC)
    monkeypatch.setenv("ACCELOPT_CPU_TARGET", "armv8.2-a+sve")
    isa = detect_isa(compiler_for(settings.c_compiler()))
    assert isa.flags == ("-march=armv8.2-a+sve",) and {"neon", "sve"} <= set(isa.features)


def test_facts_and_messages_name_the_arm_headers(arm_cc: Compiler, target: str, hw: HardwareSpec):
    facts = CpuBackend().facts(hw)
    assert {"arm_neon.h", "arm_sve.h"} <= set(facts.allowed_headers)
    assert "immintrin.h" not in facts.allowed_headers
    assert f"-mcpu={target}" in facts.compile_command
    assert "use the intrinsics of <arm_neon.h>/<arm_sve.h>" in "\n".join(facts.forbidden)
    reason = check_source('void kernel(const float *x, float *y) { asm("nop"); }')
    assert reason is not None and "<arm_neon.h>/<arm_sve.h>" in reason


# -- the micro-benchmarks ------------------------------------------------------------------------


def test_the_kernel_host_builds_for_aarch64(arm_cc: Compiler, accelopt_cache: Path):
    # The sandbox (seccomp filter, syscall numbers) is spelled per architecture: it must compile
    # for aarch64 too. (Not run under qemu: qemu-user applies no guest seccomp filter.)
    from accelopt.backends.cpu.kernel_process import host_binary

    binary = host_binary(arm_cc)
    assert elf_machine(binary) == EM_AARCH64


@pytest.mark.parametrize(
    "bench", [measure.FMA, measure.VECTOR, measure.TRIAD], ids=lambda b: b.name
)
def test_microbenchmarks_build(arm_cc: Compiler, accelopt_cache: Path, bench: measure.Microbench):
    exe = measure.build(bench, arm_cc)
    assert elf_machine(exe) == EM_AARCH64


@needs_qemu
def test_microbenchmarks_run_under_qemu(arm_cc: Compiler, accelopt_cache: Path):
    runs = {measure.FMA: (20_000, 1), measure.TRIAD: (4096, 1)}
    for bench, args in runs.items():
        proc = qemu(measure.build(bench, arm_cc), *map(str, args))
        assert proc.returncode == 0, f"{bench.source}: {proc.stderr[-500:]}"
        line = json.loads(proc.stdout.strip().splitlines()[-1])
        assert line.get("rate", line.get("bandwidth", 0)) > 0, line


# -- the shipped kernels -------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "kind"), SHIPPED, ids=[f"{n}-{k}" for n, k in SHIPPED])
def test_shipped_kernels_pass_the_checks_and_build(target: str, in_tmp: Path, name, kind):
    source = shipped_kernel(load_problem(name), kind).read_text()
    assert check_source(source, "aarch64") is None
    _, artifact = build_shipped(name, kind)  # the symbol check ran on the aarch64 object
    assert elf_machine(artifact) == EM_AARCH64


def test_the_symbol_check_reads_the_aarch64_object(arm_cc: Compiler, in_tmp: Path):
    """A call the text checks cannot see (through a function pointer) is caught on the object."""
    source = (
        "typedef long wfn(int, const void *, unsigned long);\nextern wfn write;\n"
        'void kernel(const float *x, float *y) { wfn *w = write; w(1, "hi", 2); y[0] = x[0]; }\n'
    )
    assert check_source(source) is None
    built = CpuBackend().build(Kernel(source), load_problem("silu"), {"M": 4, "N": 4}, 60)
    assert built.status is Status.REJECTED and "write" in built.error
    assert built.artifact is None or elf_machine(built.artifact) == EM_AARCH64


def test_outline_atomics_pass_the_symbol_check(arm_cc: Compiler, target: str, in_tmp: Path):
    """Below armv8.1 (Cortex-A72) GCC calls libgcc's outline atomics, whose load-time LSE probe
    imports __getauxval: an atomic in a kernel must not get it rejected."""
    source = (
        "static int count;\n"
        "void kernel(const float *x, float *y) {\n"
        "#pragma omp parallel\n"
        "    __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED);\n"
        "    for (int i = 0; i < M * N; i++) y[i] = x[i];\n"
        "}\n"
    )
    built = CpuBackend().build(Kernel(source), load_problem("silu"), {"M": 4, "N": 4}, 60)
    assert built.ok and built.artifact is not None, built.error
    imported = symbols.imported_symbols(built.artifact, symbols.nm_for(arm_cc))
    assert ("__getauxval" in imported) == (target == "cortex-a72")  # the case is exercised


# -- running them (qemu) -------------------------------------------------------------------------

DRIVER = """#include <math.h>
#include <stdio.h>
#include <stdlib.h>
@PROTOTYPE@
enum { NBUF = @NBUF@, NIN = @NIN@ };
/* argv: inputs file, outputs file, then each buffer's element count. Writes every buffer, inputs
   included (so that a kernel that writes its inputs is seen); outputs start as NaN. */
int main(int argc, char **argv) {
    if (argc != 3 + NBUF) return 2;
    FILE *in = fopen(argv[1], "rb"), *out;
    float *b[NBUF];
    size_t n[NBUF];
    for (int i = 0; i < NBUF; i++) {
        n[i] = strtoul(argv[3 + i], NULL, 10);
        b[i] = aligned_alloc(64, (n[i] * sizeof(float) + 63) / 64 * 64);
        if (i < NIN && fread(b[i], sizeof(float), n[i], in) != n[i]) return 3;
        for (size_t j = 0; i >= NIN && j < n[i]; j++) b[i][j] = NAN;
    }
    fclose(in);
    kernel(@ARGS@);
    out = fopen(argv[2], "wb");
    for (int i = 0; i < NBUF; i++) fwrite(b[i], sizeof(float), n[i], out);
    return fclose(out) != 0;
}
"""


def driver_source(problem: Problem) -> str:
    n_in, n_out = len(problem.inputs), len(problem.outputs)
    return (
        DRIVER.replace("@PROTOTYPE@", prototype(n_in, n_out).strip())
        .replace("@NBUF@", str(n_in + n_out))
        .replace("@NIN@", str(n_in))
        .replace("@ARGS@", ", ".join(f"b[{i}]" for i in range(n_in + n_out)))
    )


def link_driver(problem: Problem, artifact: Path, arm_cc: Compiler, where: Path) -> Path:
    """An aarch64 executable that calls the built kernel (linked against its shared object)."""
    (where / "driver.c").write_text(driver_source(problem))
    exe = where / "driver"
    cmd = [*arm_cc.command, "-O1", "driver.c", str(artifact), "-o", str(exe), "-fopenmp", "-lm"]
    proc = subprocess.run(cmd, cwd=where, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-1000:]
    return exe


def run_kernel(problem: Problem, exe: Path, inputs: tuple[np.ndarray, ...], where: Path):
    """The kernel's outputs, and its inputs as they are after the call, from a run under qemu."""
    shapes = [x.shape for x in inputs] + problem.output_shapes(small_sizes(problem))
    (where / "in.bin").write_bytes(b"".join(x.tobytes() for x in inputs))
    counts = [str(int(np.prod(s))) for s in shapes]
    proc = qemu(exe, where / "in.bin", where / "out.bin", *counts)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-500:]}"
    flat = np.fromfile(where / "out.bin", dtype=np.float32)
    splits = np.cumsum([int(c) for c in counts])[:-1]
    arrays = [a.reshape(s) for a, s in zip(np.split(flat, splits), shapes, strict=True)]
    return arrays[len(inputs) :], arrays[: len(inputs)]


@needs_qemu
@pytest.mark.parametrize(("name", "kind"), SHIPPED, ids=[f"{n}-{k}" for n, k in SHIPPED])
def test_shipped_kernels_match_the_reference_under_qemu(
    arm_cc: Compiler, in_tmp: Path, name: str, kind: str
):
    problem, artifact = build_shipped(name, kind)
    exe = link_driver(problem, artifact, arm_cc, in_tmp)
    inputs = problem.generate(small_sizes(problem), seed=7)
    expected = problem.reference(*(x.astype(np.float64) for x in inputs))
    outputs, after = run_kernel(problem, exe, inputs, in_tmp)
    for spec, x, y in zip(problem.inputs, inputs, after, strict=True):
        assert np.array_equal(x, y, equal_nan=True), f"input {spec.name!r} was modified"
    for spec, out, ref in zip(problem.outputs, outputs, expected, strict=True):
        assert np.isfinite(out).all(), f"output {spec.name!r} has NaN/Inf"
        error = rel_l2_error(out, np.asarray(ref))
        assert error <= problem.tolerance, f"output {spec.name!r}: rel. L2 error {error:.2e}"


INTRINSICS = """
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__ARM_FEATURE_SVE)
#include <arm_sve.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif
#include <stddef.h>
void kernel(const float *restrict x, float *restrict y) {
    size_t i = 0;
    const size_t n = (size_t)M * N;
#if defined(__ARM_FEATURE_SVE)
    for (; i < n; i += svcntw()) {
        svbool_t p = svwhilelt_b32_u64(i, n);
        svst1_f32(p, y + i, svmul_n_f32_x(p, svld1_f32(p, x + i), 2.0f));
    }
#elif defined(__ARM_NEON)
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(x + i), 2.0f));
#elif defined(__AVX__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(2.0f)));
#endif
    for (; i < n; i++) y[i] = 2.0f * x[i];
}
"""


@needs_qemu
def test_neon_and_sve_intrinsics_build_and_run(arm_cc: Compiler, target: str, in_tmp: Path):
    """A path per architecture in one source (y = 2x): SVE on Neoverse V1, NEON on Cortex-A72."""
    silu = load_problem("silu")
    assert check_source(INTRINSICS, "aarch64") is None
    built = CpuBackend().build(Kernel(INTRINSICS), silu, small_sizes(silu), BUILD_TIMEOUT_S)
    assert built.ok and built.artifact is not None, built.error
    x = silu.generate(small_sizes(silu), seed=3)
    outputs, _ = run_kernel(silu, link_driver(silu, built.artifact, arm_cc, in_tmp), x, in_tmp)
    np.testing.assert_array_equal(outputs[0], 2 * x[0])
