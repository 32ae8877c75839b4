"""Every thread of the kernel's process is contained, not only the one that calls the kernel.

The attack kernels (``attacks/``) run on an OpenMP pool thread or at load time, built straight
with gcc past every check. Each is first run by a plain program (``attacks/driver.c``, no
sandbox) to show that the attack works, then in the kernel's process, where it must fail: as
nobody (a root worker holding CAP_SYS_PTRACE, as here) and as a root without capabilities
(Docker's default, simulated with ``capsh --drop=cap_sys_ptrace``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attacks
import pytest

from accelopt.backends.base import KernelError
from accelopt.backends.containment import DROP_TO_NOBODY, check_tasks, task_status
from accelopt.backends.cpu import openmp
from accelopt.backends.registry import shipped_kernel
from accelopt.backends.status import Status

ROOT = os.geteuid() == 0
REJECTED = Status.REJECTED.value


@pytest.fixture(scope="module")
def shared_dir() -> Iterator[Path]:
    """A directory anyone can read (kernels, a planted world-readable file): tmp_path is root's."""
    path = Path(tempfile.mkdtemp(prefix="accelopt-threads-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def driver(shared_dir: Path) -> Path:
    return attacks.driver(shared_dir)


def paths(*formats: str) -> str:
    return ",".join(f'"{f}"' for f in formats)


def refused(outcome: attacks.Outcome, syscall: str) -> bool:
    return outcome.status == REJECTED and f"({syscall} (" in outcome.error


# -- file reads from a pool thread ------------------------------------------------------------


@pytest.mark.skipif(not ROOT, reason="the nobody mode is a root worker's")
def test_a_pool_thread_reads_no_file_as_nobody(accelopt_cache, shared_dir, driver):
    planted = shared_dir / "planted.txt"
    planted.write_text("planted-secret-4711")
    planted.chmod(0o644)
    wanted = paths(str(planted), "/etc/passwd", "/proc/%d/cmdline", "/proc/%d/status")
    artifact = attacks.build(shared_dir, "pool_thread_reads_files", PATHS=wanted)
    shown = attacks.unsandboxed(driver, artifact, as_nobody=True)
    assert "planted-secret-4711" in shown and "read /etc/passwd: root" in shown  # it would harm
    outcome = attacks.in_kernel_host(artifact)
    assert refused(outcome, "openat"), outcome  # at its first open: nothing read, nothing shown


_WITHOUT_PTRACE = """
import dataclasses, json, sys
import attacks
print(json.dumps(dataclasses.asdict(attacks.in_kernel_host(attacks.Path(sys.argv[1])))))
"""


def without_ptrace(tmp_path: Path, artifact: Path) -> attacks.Outcome:
    """The kernel run by a root worker that lacks CAP_SYS_PTRACE (as in Docker)."""
    script = tmp_path / "without_ptrace.py"
    script.write_text(_WITHOUT_PTRACE)
    command = f"{sys.executable} {script} {artifact}"
    env = os.environ | {"PYTHONPATH": str(attacks.ATTACKS.parents[1] / "support")}
    with (tmp_path / "log").open("w+") as log:  # a file, as a worker's log is: its tail is read
        run = subprocess.run(
            ["capsh", "--drop=cap_sys_ptrace", "--", "-c", command],
            stdout=subprocess.PIPE, stderr=log, text=True, timeout=120, env=env,
        )  # fmt: skip
        log.seek(0)
        assert run.returncode == 0, log.read()[-2000:]
    return attacks.Outcome(**json.loads(run.stdout.strip().splitlines()[-1]))


needs_capsh = pytest.mark.skipif(
    not ROOT or shutil.which("capsh") is None, reason="simulates a container's root: root, capsh"
)


@needs_capsh
def test_a_pool_thread_of_a_capability_less_root_reads_nothing(
    accelopt_cache, tmp_path, shared_dir, driver
):
    secret = shared_dir / "root-only.txt"
    secret.write_text("root-only-secret-0600")
    secret.chmod(0o600)
    wanted = paths(str(secret), "/proc/%d/environ", "/proc/%d/mem")
    artifact = attacks.build(shared_dir, "pool_thread_reads_files", PATHS=wanted)
    assert "root-only-secret-0600" in attacks.unsandboxed(driver, artifact)  # root reads it
    outcome = without_ptrace(tmp_path, artifact)
    assert refused(outcome, "openat"), outcome


@needs_capsh
def test_every_thread_of_a_capability_less_root_has_no_capability(
    accelopt_cache, tmp_path, shared_dir
):
    outcome = without_ptrace(tmp_path, attacks.build(shared_dir, "parallel_silu", THREADS=2))
    assert outcome.status == "ran", outcome
    facts = outcome.facts
    assert facts["privileges"] == "root-without-capabilities" and facts["tasks"] == "2"
    for cap in ("capinh", "capprm", "capeff", "capbnd", "capamb"):
        assert facts[f"tasks_{cap}"] == "0" * 16
    assert facts["tasks_seccomp"] == "2" and facts["tasks_nonewprivs"] == "1"


# -- signals through a descriptor's owner (SIGIO) --------------------------------------------


@pytest.mark.skipif(not ROOT, reason="the target runs as nobody, as other kernels do")
def test_sigio_from_a_pool_thread_reaches_no_process(accelopt_cache, shared_dir, driver):
    def target() -> subprocess.Popen:
        ids = {"user": attacks.NOBODY, "group": attacks.NOBODY, "extra_groups": []}
        return subprocess.Popen(["sleep", "60"], **ids)

    for sandboxed in (False, True):
        victim = target()
        try:
            artifact = attacks.build(shared_dir, "pool_thread_sigio", TARGET=victim.pid)
            if not sandboxed:
                attacks.unsandboxed(driver, artifact, as_nobody=True)
                assert victim.wait(timeout=10) == -signal.SIGKILL  # the attack kills it
                continue
            outcome = attacks.in_kernel_host(artifact)
            assert refused(outcome, "fcntl"), outcome
            time.sleep(0.2)
            assert victim.poll() is None  # alive
        finally:
            victim.kill()
            victim.wait()


# -- code at load time (refused by the object checks; should one get through) --------------


def test_a_file_opened_at_load_time_is_out_of_reach(accelopt_cache, shared_dir, driver):
    artifact = attacks.build(shared_dir, "opens_at_load")
    assert "opened -" not in attacks.unsandboxed(driver, artifact)  # it opens the file
    outcome = attacks.in_kernel_host(artifact)
    assert outcome.status == "ran", outcome
    if outcome.facts.get("landlock") == "0":
        why = outcome.facts.get("landlock_error")
        pytest.skip(f"Landlock is not available here (errno {why}): reported in isolation")
    assert outcome.output[0] == -13  # EACCES: Landlock handles every file access, allows none


@pytest.mark.parametrize(
    "call, syscall",
    [(1, "prctl"), (2, "rt_sigaction"), (3, "seccomp"), (4, "setresuid"), (5, "seccomp")],
)
def test_the_loader_stage_allows_only_loading(accelopt_cache, shared_dir, call, syscall):
    outcome = attacks.in_kernel_host(attacks.build(shared_dir, "calls_at_load", CALL=call))
    assert refused(outcome, syscall), outcome


# -- every thread is checked before the first call -------------------------------------------


def test_every_thread_is_checked_and_reported(accelopt_cache, shared_dir):
    from accelopt import settings
    from accelopt.backends.cpu.remote import KernelHostDevice
    from accelopt.hardware.toolchain import compiler_for

    device = KernelHostDevice(compiler_for(settings.c_compiler()), os.environ)
    try:
        device.load(attacks.build(shared_dir, "parallel_silu", THREADS=2), 2, 2, 1 << 30)
        tasks = task_status(device.host.pid)
    finally:
        device.close()
    facts = device.isolation
    assert facts["tasks"] == str(len(tasks)) == "2"
    assert all(t["Seccomp"] == "2" and t["NoNewPrivs"] == "1" for t in tasks.values())
    if "Seccomp_filters" in next(iter(tasks.values())):
        assert all(t["Seccomp_filters"] == "2" for t in tasks.values())
    assert facts["tasks_seccomp"] == "2" and facts["tsync"] == "1"


CONTAINED = {
    "Uid": "65534 65534 65534 65534", "Gid": "65534 65534 65534 65534", "NoNewPrivs": "1",
    "Seccomp": "2", "Seccomp_filters": "2", "CapInh": "0" * 16, "CapPrm": "0" * 16,
    "CapEff": "0" * 16, "CapBnd": "0" * 16, "CapAmb": "0" * 16,
}  # fmt: skip
FACTS = {"seccomp": "1", "seccomp_load": "1"}


@pytest.mark.parametrize(
    "field, value",
    [
        ("CapEff", "000001ffffffffff"),
        ("Seccomp_filters", "1"),
        ("Uid", "0 0 0 0"),
        ("Seccomp", "0"),
    ],
)
def test_a_thread_less_contained_than_required_is_refused(field, value):
    tasks = {100: CONTAINED, 101: CONTAINED | {field: value}}
    with pytest.raises(KernelError) as caught:
        check_tasks(tasks, 100, FACTS, DROP_TO_NOBODY)
    assert caught.value.status is Status.REJECTED
    assert "thread 101" in str(caught.value) and field in str(caught.value)
    assert check_tasks({100: CONTAINED, 101: CONTAINED}, 100, FACTS, DROP_TO_NOBODY)["tasks"] == "2"


# -- the user's OpenMP settings --------------------------------------------------------------


@pytest.mark.parametrize(
    "settings_",
    [
        {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"},
        {"OMP_PROC_BIND": "true"},
        {"OMP_PROC_BIND": "spread", "OMP_PLACES": "threads"},
        {"GOMP_CPU_AFFINITY": "0-1"},
        {"OMP_WAIT_POLICY": "active", "GOMP_SPINCOUNT": "1000", "OMP_DYNAMIC": "true"},
        {"OMP_DISPLAY_ENV": "true", "OMP_DISPLAY_AFFINITY": "true", "OMP_STACKSIZE": "16M"},
    ],
)
def test_openmp_settings_work(accelopt_cache, shared_dir, settings_):
    import numpy as np

    x = np.linspace(-3, 3, attacks.N, dtype=np.float32)
    want = x / (1 + np.exp(-x))
    for threads in (2, 4):  # 4: more than the pool, made after the filters
        artifact = attacks.build(shared_dir, "parallel_silu", THREADS=threads)
        outcome = attacks.in_kernel_host(artifact, os.environ | settings_)
        assert outcome.status == "ran", outcome
        np.testing.assert_allclose(outcome.output, want, rtol=1e-5)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="binding two threads needs two CPUs")
def test_the_pool_is_bound_as_omp_places_says(accelopt_cache, shared_dir):
    from accelopt import settings
    from accelopt.backends.cpu.remote import KernelHostDevice
    from accelopt.hardware.toolchain import compiler_for

    env = os.environ | {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}
    device = KernelHostDevice(compiler_for(settings.c_compiler()), env)
    try:
        device.load(attacks.build(shared_dir, "parallel_silu", THREADS=2), 2, 2, 1 << 30)
        cpus = _affinities(device.host.pid)
    finally:
        device.close()
    assert len(cpus) == 2 and all("," not in c and "-" not in c for c in cpus), cpus


def _affinities(pid: int) -> list[str]:
    out = []
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        fields = dict(line.partition(":\t")[::2] for line in status.read_text().splitlines())
        out.append(fields.get("Cpus_allowed_list", "").strip())
    return out


def test_openmp_settings_libgomp_does_not_read_are_refused_in_one_sentence():
    assert openmp.refusal({"OMP_PROC_BIND": "close", "OMP_NUM_THREADS_ALL": "2"}) == ""
    tool = openmp.refusal({"OMP_TOOL_LIBRARIES": "/tmp/tool.so"})
    assert "OMP_TOOL_LIBRARIES" in tool and "unset" in tool and "\n" not in tool
    typo = openmp.refusal({"OMP_PROCBIND": "close"})
    assert "OMP_PROCBIND" in typo and "misspelt" in typo
    kept = openmp.openmp_environment({"OMP_PLACES": "cores", "OMP_FOO": "1", "HOME": "/root"})
    assert kept == {"OMP_PLACES": "cores"}


def test_preflight_refuses_an_unknown_openmp_setting(monkeypatch):
    from accelopt.backends.cpu.backend import CpuBackend
    from accelopt.errors import UserError

    monkeypatch.setenv("OMP_TOOL", "enabled")
    with pytest.raises(UserError, match="OMP_TOOL would load a tool library"):
        CpuBackend().preflight()


BIND = [{"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}, {"OMP_PROC_BIND": "true"}]


@pytest.mark.parametrize("settings_", BIND, ids=["close-cores", "true"])
def test_the_shipped_baselines_pass_with_binding(accelopt_cache, hw, monkeypatch, settings_):
    from accelopt.backends.kernel import Kernel
    from accelopt.problems import load_problem
    from accelopt.profiling.config import EvalConfig
    from accelopt.profiling.parent.evaluator import Evaluator

    for name, value in settings_.items():
        monkeypatch.setenv(name, value)
    config = EvalConfig(seeds=1, warmup_calls=1, min_calls=3, min_time_s=0.01, ci_time_cap_s=0.05)
    with Evaluator(hw, config.model_copy(update={"workers": 1})) as evaluator:
        for name in ("matmul", "silu"):
            problem = load_problem(name)
            source = shipped_kernel(problem, "baseline").read_text()
            evaluation = evaluator.evaluate(Kernel(source, "cpu", "baseline"), problem, "small")
            assert evaluation.status is Status.PASSED, evaluation.error


def test_the_compute_filter_is_read_only_and_sealed_until_installed(accelopt_cache, shared_dir):
    from accelopt import settings
    from accelopt.backends.cpu.remote import KernelHostDevice
    from accelopt.hardware.toolchain import compiler_for

    device = KernelHostDevice(compiler_for(settings.c_compiler()), os.environ)
    try:
        device.load(attacks.build(shared_dir, "parallel_silu", THREADS=2), 2, 2, 1 << 30)
        smaps = Path(f"/proc/{device.host.pid}/smaps").read_text()
    finally:
        device.close()
    if device.isolation["compute_filter_sealed"] == "0":
        pytest.skip("no mseal here (Linux < 6.10): the filter's page is read-only, not sealed")
    flags = [line.split()[1:] for line in smaps.splitlines() if line.startswith("VmFlags:")]
    assert any("sl" in f for f in flags)  # a sealed mapping: the filter's page
