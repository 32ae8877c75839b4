"""Every adversarial kernel the repository has, run on this machine: attack class | status |
contained?

Two kinds of kernel:

- ``tests/backends/attacks/*.c``: code that runs where the checks cannot see (an OpenMP pool
  thread, load time), built by gcc with no check and loaded in a kernel process as the worker
  would. As root it runs twice: as this root (the kernel process becomes nobody), and under
  ``capsh --drop=cap_sys_ptrace`` (a container's root: the kernel process keeps uid 0 and drops
  every capability). Each row's "harm unsandboxed" column says what the same code did in a
  plain process (``attacks/driver.c``), so a contained row is a real attack stopped.
- ``tests/profiling/kernels/*.c``: kernels that pass the source checks (or are refused by them),
  evaluated by the full harness on their problem (silu, or matmul for the matmul cheats).
- ``tests/backends/triton_attacks``: Triton kernels (Python) that read files and environments,
  connect, start processes, write files, signal, forge the verdict, at import and at call,
  evaluated with the static checks off in their own process (Triton's interpreter), each also run
  beside its judge as the worker once ran it ("harm unsandboxed"). Skipped without torch/triton.

Usage: ``python benchmarks/red_team.py [--no-evaluator] [--no-triton]``; it prints the table and
exits 1 if any attack was not contained.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))
import attacks  # noqa: E402  (tests/support/attacks.py)

if TYPE_CHECKING:
    from accelopt.profiling.config import EvalConfig
    from accelopt.profiling.evaluation import Evaluation
    from accelopt.profiling.parent.evaluator import Evaluator

NOBODY = attacks.NOBODY
REJECTED = "REJECTED"


@dataclass(frozen=True)
class Row:
    attack: str
    mode: str
    status: str
    contained: bool
    harm: str = ""  # what the code did unsandboxed
    note: str = ""


def refused(outcome: attacks.Outcome, syscall: str) -> bool:
    return outcome.status == REJECTED and f"({syscall} (" in outcome.error


# -- attacks from where the checks cannot see ---------------------------------------------------


@dataclass(frozen=True)
class Attack:
    name: str  # attack class, as the table says it
    file: str
    defines: Callable[[Path], dict[str, str | int]]
    contained: Callable[[attacks.Outcome, Path], bool]
    shown: bool = False  # safe to run unsandboxed here, to show the harm (not fork, kill...)


def _paths(*formats: str) -> str:
    return ",".join(f'"{f}"' for f in formats)


def _planted(work: Path) -> dict[str, str | int]:
    return {"PATHS": _paths(str(work / "planted.txt"), str(work / "root-only.txt"),
                            "/etc/passwd", "/proc/%d/cmdline", "/proc/%d/environ",
                            "/proc/%d/mem")}  # fmt: skip


def _victim_alive(outcome: attacks.Outcome, work: Path) -> bool:
    pid = int((work / "victim.pid").read_text())
    time.sleep(0.2)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return refused(outcome, "fcntl")


ATTACKS = [
    Attack("pool thread reads files (planted, root-only, /etc/passwd, the worker's /proc)",
           "pool_thread_reads_files", _planted, lambda o, w: refused(o, "openat"), shown=True),
    Attack("pool thread arms SIGIO (SIGKILL to another process)", "pool_thread_sigio",
           lambda w: {"TARGET": int((w / "victim.pid").read_text())}, _victim_alive, shown=True),
    Attack("load time: open /etc/passwd", "opens_at_load", lambda w: {},
           lambda o, w: o.status == "ran" and o.output[0] == -13, shown=True),
    Attack("load time: prctl(PR_SET_DUMPABLE)", "calls_at_load", lambda w: {"CALL": 1},
           lambda o, w: refused(o, "prctl")),
    Attack("load time: SIGSYS handler", "calls_at_load", lambda w: {"CALL": 2},
           lambda o, w: refused(o, "rt_sigaction")),
    Attack("load time: own seccomp filter", "calls_at_load", lambda w: {"CALL": 3},
           lambda o, w: refused(o, "seccomp")),
    Attack("load time: setresuid", "calls_at_load", lambda w: {"CALL": 4},
           lambda o, w: refused(o, "setresuid")),
    Attack("create a file", "creates_file", lambda w: {"PATH": f'"{w / "escaped.txt"}"'},
           lambda o, w: refused(o, "openat") and not (w / "escaped.txt").exists(), shown=True),
    Attack("read the worker's environment", "reads_parent_environ", lambda w: {},
           lambda o, w: refused(o, "openat")),
    Attack("connect to loopback", "connects", lambda w: {"PORT": 9},
           lambda o, w: refused(o, "socket")),
    Attack("start a process that outlives the evaluation", "starts_process",
           lambda w: {"MARKER": f'"{w / "ran.txt"}"'},
           lambda o, w: o.status == REJECTED and not (w / "ran.txt").exists()),
    Attack("fork", "forks", lambda w: {}, lambda o, w: refused(o, "clone")),
    Attack("signal the worker", "signals_worker", lambda w: {}, lambda o, w: refused(o, "kill")),
    Attack("enter a namespace", "enters_namespace", lambda w: {},
           lambda o, w: refused(o, "setns")),
    Attack("write to other descriptors", "writes_other_descriptors", lambda w: {},
           lambda o, w: refused(o, "write")),
    Attack("raw system call from executable memory", "raw_syscall", lambda w: {},
           lambda o, w: refused(o, "socket") or os.uname().machine != "x86_64"),
    Attack("forge the done answer", "forges_done", lambda w: {},
           lambda o, w: o.status == REJECTED and "harness's channel" in o.error),
]  # fmt: skip


def _work_dir() -> Path:
    work = Path(tempfile.mkdtemp(prefix="accelopt-red-team-"))
    work.chmod(0o755)
    (work / "planted.txt").write_text("planted-secret-4711")
    (work / "planted.txt").chmod(0o644)
    (work / "root-only.txt").write_text("root-only-secret-0600")
    (work / "root-only.txt").chmod(0o600)
    return work


def _victim(work: Path) -> subprocess.Popen:
    ids: dict = {"user": NOBODY, "group": NOBODY, "extra_groups": []} if os.geteuid() == 0 else {}
    victim = subprocess.Popen(["sleep", "120"], **ids)
    (work / "victim.pid").write_text(str(victim.pid))
    return victim


def _harm(driver: Path, attack: Attack, artifact: Path, work: Path) -> str:
    """What the code does in a plain process: the first line it printed, or what it did."""
    victim = _victim(work) if attack.file == "pool_thread_sigio" else None
    if victim is not None:  # rebuilt against this victim
        artifact = attacks.build(work, attack.file, **attack.defines(work))
    out = attacks.unsandboxed(driver, artifact, as_nobody=attack.file == "pool_thread_sigio")
    if victim is not None:
        try:
            code = victim.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            victim.kill()
        return "killed its target" if code == -signal.SIGKILL else "target survived"
    if attack.file == "creates_file":
        made = (work / "escaped.txt").exists()
        (work / "escaped.txt").unlink(missing_ok=True)
        return "created the file" if made else "no file"
    read = [line for line in out.splitlines() if line.startswith(("read ", "opened"))]
    first = read[0].replace(f"{work}/", "") if read else ""
    return f"{first[:40]}... ({len(read)} files read)" if len(read) > 1 else first[:50]


def run_attacks(mode: str, with_harm: bool) -> list[Row]:
    work = _work_dir()
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    driver = attacks.driver(work) if with_harm else None
    rows = []
    for attack in ATTACKS:
        victim = _victim(work) if attack.file == "pool_thread_sigio" else None
        try:
            artifact = attacks.build(work, attack.file, **attack.defines(work))
            outcome = attacks.in_kernel_host(artifact)
            contained = attack.contained(outcome, work)
        finally:
            if victim is not None:
                victim.kill()
                victim.wait()
        shown = driver is not None and attack.shown
        harm = _harm(driver, attack, artifact, work) if shown else ""
        rows.append(Row(attack.name, mode, outcome.status, contained, harm, _why(outcome)))
    return rows


def _why(outcome: attacks.Outcome) -> str:
    """The stopping cause in a few words: the forbidden call, or the error's first clause."""
    found = re.search(r"forbids \((\w+) \(", outcome.error)
    if found:
        return f"seccomp: {found.group(1)}"
    if outcome.status == "ran":
        return "ran; Landlock: EACCES" if outcome.output[:1] == [-13.0] else "ran"
    return outcome.error.split(";")[0][:60]


def _mode() -> str:
    if os.geteuid() != 0:
        return "user"
    from accelopt.backends.containment import DROP_TO_NOBODY, drop_mode

    return "nobody" if drop_mode() == DROP_TO_NOBODY else "root-without-capabilities"


def without_ptrace() -> list[Row]:
    """The same attacks from a root without CAP_SYS_PTRACE (capsh), read back as JSON."""
    if os.geteuid() != 0 or shutil.which("capsh") is None:
        return []
    command = f"{sys.executable} {Path(__file__).resolve()} --attacks-json"
    with tempfile.TemporaryFile("w+") as log:
        capsh = ["capsh", "--drop=cap_sys_ptrace", "--", "-c", command]
        run = subprocess.run(capsh, stdout=subprocess.PIPE, stderr=log, text=True, timeout=600)
        if run.returncode != 0:
            log.seek(0)
            raise SystemExit(f"the capability-less run failed: {log.read()[-1000:]}")
    return [Row(**row) for row in json.loads(run.stdout.strip().splitlines()[-1])]


# -- kernels through the whole harness --------------------------------------------------------

KERNELS = ROOT / "tests" / "profiling" / "kernels"
MATMUL = {"recomputes_what_changed", "replays_output"}  # matmul cheats; the rest are silu kernels
HONEST = {"correct_sigmoid", "reports_its_state"}  # controls, not attacks
LOGS = {"prints_a_secret", "prints_environment", "prints_megabytes"}  # must leak nothing
SECRET = "sk-accelopt-red-team-1234"


def _config(**update: object) -> EvalConfig:
    from accelopt.profiling.config import EvalConfig

    config = EvalConfig(seeds=3, warmup_calls=2, min_calls=20, min_time_s=0.05,
                        ci_time_cap_s=0.5, call_timeout_floor_s=5.0, workers=1,
                        memory_cap_bytes=1 << 30, verify_calls=4)  # fmt: skip
    return config.model_copy(update=update)


def _judge(name: str, evaluation: Evaluation, honest_s: float | None) -> tuple[bool, str]:
    """Whether the kernel was contained, and what kind of attack it is."""
    status, log = evaluation.status.value, evaluation.model_dump_json()
    if name in HONEST:
        return status == "PASSED", "control (honest)"
    if name in LOGS:
        return SECRET not in log, "log (may pass; must leak nothing)"
    if name in MATMUL and status == "PASSED" and honest_s is not None:
        return (
            evaluation.latency_s or 0.0
        ) >= 0.8 * honest_s, "skipped work (passes only at honest speed)"
    return status != "PASSED", "cheat or fault"


def _evaluator_rows() -> list[Row]:
    from accelopt.backends.kernel import Kernel
    from accelopt.hardware.cpu_spec import measure_cpu
    from accelopt.problems import load_problem
    from accelopt.profiling.parent.evaluator import Evaluator

    os.environ["RED_TEAM_API_KEY"] = SECRET  # what prints_a_secret prints: redacted in logs
    hardware, rows = measure_cpu(), []
    matmul = load_problem("matmul")
    for policy in ("auto", "some"):  # some: batches as a memory-bound problem gets them
        with Evaluator(hardware, _config(full_batches=policy)) as evaluator:
            names = sorted(p.stem for p in KERNELS.glob("*.c"))
            names = names if policy == "auto" else sorted(MATMUL)
            honest = Kernel(matmul.kernel_path("baseline").read_text(), "cpu", "baseline")
            honest_s = evaluator.evaluate(honest, matmul, "cpu").latency_s
            variants = [(n, "") for n in names] + [("recomputes_what_changed", "THROTTLE 3")]
            for name, define in variants:
                source = (KERNELS / f"{name}.c").read_text()
                source = f"#define {define}\n{source}" if define else source
                problem = matmul if name in MATMUL else load_problem("silu")
                evaluation = evaluator.evaluate(Kernel(source, "cpu", name), problem, "cpu")
                contained, kind = _judge(name, evaluation, honest_s)
                if name in {"leaves_fp_state", "leaks_memory"}:  # its own fate is its own
                    contained, kind = _next_is_clean(evaluator), "state left for the next kernel"
                label = f"{name}{' ' + define if define else ''} ({kind}; {problem.name})"
                note = (evaluation.error or "").split("\n")[0][:70]
                rows.append(Row(label, f"harness, {policy}", evaluation.status.value, contained,
                                note=note))  # fmt: skip
    return rows


def _next_is_clean(evaluator: Evaluator) -> bool:
    from accelopt.backends.kernel import Kernel
    from accelopt.problems import load_problem

    source = (KERNELS / "reports_its_state.c").read_text()
    after = evaluator.evaluate(Kernel(source, "cpu", "after"), load_problem("silu"), "cpu")
    clean = "mxcsr=1f80" in after.log or os.uname().machine != "x86_64"
    return after.status.value == "PASSED" and clean and "levels=0 " not in after.log


def _triton_rows() -> list[Row]:
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except ImportError:
        return []
    from triton_plant import Plant, run_driver  # tests/support

    work = Path(tempfile.mkdtemp(prefix="accelopt-red-team-triton-"))
    work.chmod(0o755)
    old, new = Plant(work / "old"), Plant(work / "new")
    try:
        before = run_driver("run_in_process.py", [str(p) for p in old.attacks()], work / "old",
                            SECRET)  # fmt: skip
        kernels = [str(work / "lock"), *(str(p) for p in new.attacks())]
        after = run_driver("run_contained.py", kernels, work / "new", SECRET)
        rows = [_triton_row(name, before[name], row) for name, row in after.items()]
        log = (work / "new.log").read_text()
        leaked = [s for s in ("PUBLIC-CANARY", "PRIVATE-CANARY", SECRET) if s in log]
        alive = all(v.poll() is None for v in new.victims.values())
        clean = not (new.received or new.markers() or leaked) and alive
        harm = f"{len(old.received)} connections, {len(old.markers())} files made, canaries read"
        note = f"received {len(new.received)}, files {new.markers()}, leaked {leaked}"
        rows.append(Row("triton: anything outside read or changed?", "triton, own process",
                        "none" if clean else "SOME", clean, harm, note))  # fmt: skip
        return rows
    finally:
        old.close()
        new.close()
        shutil.rmtree(work, ignore_errors=True)


def _triton_row(name: str, before: dict[str, object], after: dict[str, object]) -> Row:
    status = str(after["status"] or "PASSED")
    if name == "forges_verdict":
        harm = "a NaN output passed the check" if before["nan_output_passes"] else "none seen"
    else:
        harm = f"raised: {str(before['raised'])[:50]}" if before["raised"] else "ran to the end"
    note = str(after["error"] or "").split("\n")[0][:70]
    return Row(f"{name} (triton)", "triton, own process", status, status != "PASSED", harm, note)


def _table(rows: list[Row], out: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="accelopt red team: every adversarial kernel of the repository, here")
    for column in ("attack class", "mode", "status", "contained?", "harm unsandboxed", "why"):
        table.add_column(column, overflow="fold")
    for r in rows:
        table.add_row(r.attack, r.mode, r.status, "yes" if r.contained else "NO", r.harm, r.note)
    Console(file=out, width=200).print(table)


def _markdown(rows: list[Row], out: TextIO) -> None:
    print("| attack class | mode | status | contained? | harm unsandboxed | why |", file=out)
    print("|---|---|---|---|---|---|", file=out)
    for r in rows:
        cells = [r.attack, r.mode, r.status, "yes" if r.contained else "**NO**", r.harm, r.note]
        print("| " + " | ".join(c.replace("|", "/") for c in cells) + " |", file=out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-evaluator", action="store_true", help="only the process attacks")
    parser.add_argument("--no-triton", action="store_true", help="leave out the Triton attacks")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table, no colours")
    parser.add_argument("--attacks-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="accelopt-red-team-cache-")
    atexit.register(shutil.rmtree, cache, ignore_errors=True)
    os.environ["ACCELOPT_CACHE_DIR"] = cache
    # The kernels' log is this process's stdout and stderr, whose tail names a forbidden call:
    # a file while they run; the table goes to the real stdout.
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+") as log, os.fdopen(os.dup(1), "w") as out:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            run(args, out)
        finally:
            os.dup2(saved, 2)


def run(args: argparse.Namespace, out: TextIO) -> None:
    if args.attacks_json:
        rows = run_attacks(_mode(), with_harm=False)
        print(json.dumps([r.__dict__ for r in rows]), file=out)
        return
    rows = run_attacks(_mode(), with_harm=True) + without_ptrace()
    if not args.no_evaluator:
        rows += _evaluator_rows()
    if not args.no_triton:
        rows += _triton_rows()
    (_markdown if args.markdown else _table)(rows, out)
    out.flush()
    sys.exit(0 if all(r.contained for r in rows) else 1)


if __name__ == "__main__":
    main()
