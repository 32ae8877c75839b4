"""The cpu backend on tiny sizes (build, load into its kernel host process, call), Kernel identity,
Status."""

from __future__ import annotations

import numpy as np
import pytest

from accelopt.backends import Kernel, Status, get_backend, normalize_source
from accelopt.backends.base import BuildResult, KernelLoadError
from accelopt.backends.cpu.backend import CpuBackend
from accelopt.backends.registry import shipped_kernel
from accelopt.errors import UserError
from accelopt.problems import load_problem

TINY = {"M": 4, "N": 8}


@pytest.fixture
def in_tmp(accelopt_cache, cc, tmp_path, monkeypatch):
    """The backend writes kernel.c into the working directory, as a worker's scratch."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_get_backend():
    assert get_backend("cpu").name == "cpu"
    assert isinstance(get_backend("cpu"), CpuBackend)
    with pytest.raises(UserError, match="unknown backend"):
        get_backend("nki-but-not-yet")


def test_build_load_and_call_the_silu_baseline(in_tmp, accelopt_cache):
    silu = load_problem("silu")
    backend = CpuBackend()
    built = backend.build(Kernel(shipped_kernel(silu, "baseline").read_text()), silu, TINY, 60)
    assert built.ok, built.error
    assert built.artifact is not None and accelopt_cache in built.artifact.parents
    device = backend.device()  # buffers first: the kernel host is trusted until the load
    (x,) = silu.generate(TINY, seed=3)
    xb = device.upload(x, into=device.empty((4, 8)))
    yb = device.empty((4, 8), fill=np.nan)
    backend.set_threads(1)
    loaded = backend.load(built.artifact, silu, device)
    try:
        loaded([xb, yb])
        np.testing.assert_allclose(device.to_host(yb), silu.reference(x)[0], rtol=1e-6)
        device.fill(yb, np.nan)
        call = loaded.bind([xb, yb])
        call()
        np.testing.assert_allclose(device.to_host(yb), silu.reference(x)[0], rtol=1e-6)
        assert device.isolation["seccomp"] == "1"
    finally:
        loaded.close()
        loaded.close()  # closing twice is harmless


def test_build_of_a_rejected_kernel_does_not_compile(in_tmp):
    silu = load_problem("silu")
    source = '#include <stdio.h>\nvoid kernel(const float *x, float *y) { puts("x"); }\n'
    built = CpuBackend().build(Kernel(source), silu, TINY, 60)
    assert built.status is Status.REJECTED and "stdio.h" in built.error
    assert built.artifact is None and not built.ok
    assert not (in_tmp / "kernel.c").exists()


def test_build_uses_the_problems_signature(in_tmp):
    matmul = load_problem("matmul")
    two_args = "void kernel(const float *a, float *b) { b[0] = a[0]; }\n"
    built = CpuBackend().build(Kernel(two_args), matmul, {"M": 2, "N": 2, "K": 2}, 60)
    assert built.status is Status.COMPILE_ERROR and "conflicting types" in built.error


def test_load_without_a_kernel_function(in_tmp):
    silu = load_problem("silu")
    source = "void not_the_kernel(const float *x, float *y) { y[0] = x[0]; }\n"
    built = CpuBackend().build(Kernel(source), silu, TINY, 60)
    assert built.ok  # the prototype is only a declaration: this links
    assert built.artifact is not None
    backend = CpuBackend()
    device = backend.device()
    with pytest.raises(KernelLoadError, match="no function named `kernel`"):
        backend.load(built.artifact, silu, device)
    device.close()


def test_build_result_ok():
    assert not BuildResult(None).ok  # no artifact
    assert not BuildResult(Status.COMPILE_ERROR, "x").ok


# -- Kernel identity ----------------------------------------------------------------------------

SOURCE = """\
#include <math.h>
void kernel(const float *x, float *y) {
    for (int i = 0; i < M; i++) y[i] = x[i];
}
"""


def test_hash_ignores_comments_and_whitespace():
    noisy = """\
/* a header comment */
#include <math.h>   // the math

void kernel(const float *x,   float *y) {   // copy
        for (int i = 0; i < M; i++)   y[i] = x[i];   /* done */


}
"""
    assert Kernel(noisy).hash == Kernel(SOURCE).hash
    assert normalize_source(noisy) == normalize_source(SOURCE)


def test_hash_changes_with_code_and_backend():
    assert Kernel(SOURCE.replace("y[i] = x[i]", "y[i] = -x[i]")).hash != Kernel(SOURCE).hash
    assert Kernel(SOURCE, backend="triton").hash != Kernel(SOURCE, backend="cpu").hash


def test_hash_ignores_the_label():
    assert Kernel(SOURCE, name="baseline").hash == Kernel(SOURCE, name="candidate-3").hash
    assert len(Kernel(SOURCE).hash) == 16


def test_status_ok_only_when_passed():
    assert [s for s in Status if s.ok] == [Status.PASSED]
    assert Status("CRASH") is Status.CRASH and str(Status.TIMEOUT) == "TIMEOUT"


def test_preflight_refuses_a_system_without_the_syscall_filter(cc, monkeypatch):
    from accelopt.backends.cpu import backend as cpu_backend

    refused = {"seccomp": "0", "seccomp_load": "0", "uid": "1000", "dropped": "0",
               "memory_access": "1"}  # fmt: skip
    monkeypatch.setattr(cpu_backend, "probe_isolation", lambda *_: refused)
    cpu_backend.sandbox_refused.cache_clear()
    try:
        with pytest.raises(UserError, match="ACCELOPT_UNSANDBOXED=1"):
            CpuBackend().preflight()
        monkeypatch.setenv("ACCELOPT_UNSANDBOXED", "1")
        CpuBackend().preflight()  # the user chose to run without it
    finally:
        cpu_backend.sandbox_refused.cache_clear()


def test_preflight_passes_where_the_sandbox_applies(cc):
    CpuBackend().preflight()


def test_preflight_refuses_a_system_where_the_worker_cannot_reach_the_kernel(cc, monkeypatch):
    from accelopt.backends.cpu import backend as cpu_backend

    facts = {"seccomp": "1", "seccomp_load": "1", "memory_access": "its memory (EPERM)"}
    monkeypatch.setattr(cpu_backend, "probe_isolation", lambda *_: facts)
    monkeypatch.setenv("ACCELOPT_UNSANDBOXED", "1")  # no way around this one
    cpu_backend.sandbox_refused.cache_clear()
    try:
        with pytest.raises(UserError, match="ptrace_scope"):
            CpuBackend().preflight()
    finally:
        cpu_backend.sandbox_refused.cache_clear()
