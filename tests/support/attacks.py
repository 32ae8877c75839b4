"""Building and running the attack kernels of ``tests/backends/attacks/`` (importable as
``attacks``): by a plain program with no sandbox (``unsandboxed``: what the attack does when
nothing stops it) and in the kernel's process (``in_kernel_host``). Used by the tests and by
``benchmarks/red_team.py``."""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ATTACKS = Path(__file__).resolve().parents[1] / "backends" / "attacks"
N = 1024
NOBODY = 65534


def build(out: Path, name: str, **defines: str | int) -> Path:
    """``attacks/NAME.c`` built by gcc with no check at all, readable by anyone (nobody runs it)."""
    flags = [f"-DN={N}", *(f"-D{k}={v}" for k, v in sorted(defines.items()))]
    tag = hashlib.sha256(" ".join(flags).encode()).hexdigest()[:8]
    target = out / f"{name}-{tag}.so"
    cmd = ["gcc", "-O1", "-fopenmp", "-shared", "-fPIC", *flags, "-o", str(target)]
    subprocess.run([*cmd, str(ATTACKS / f"{name}.c"), "-lm"], check=True, capture_output=True)
    target.chmod(0o755)
    return target


def driver(out: Path) -> Path:
    target = out / "driver"
    cmd = ["gcc", "-O1", "-fopenmp", "-o", str(target), str(ATTACKS / "driver.c"), "-ldl"]
    subprocess.run(cmd, check=True, capture_output=True)
    target.chmod(0o755)
    return target


def unsandboxed(driver_path: Path, artifact: Path, as_nobody: bool = False) -> str:
    """What the kernel's code prints when run by a plain program (as nobody, or as this user)."""
    ids: dict = {"user": NOBODY, "group": NOBODY, "extra_groups": []} if as_nobody else {}
    env = {"OMP_NUM_THREADS": "2", "PATH": os.environ.get("PATH", "")}
    cmd = [str(driver_path), str(artifact)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, **ids).stdout


@dataclass
class Outcome:
    """How the kernel's process ended: ``status`` "ran" (with its output) or the KernelError's."""

    status: str
    error: str = ""
    output: list[float] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)


def in_kernel_host(artifact: Path, env: dict[str, str] | None = None, threads: int = 2) -> Outcome:
    """Load the kernel in a kernel process (as the worker would) and call it once."""
    from accelopt import settings
    from accelopt.backends.base import KernelError
    from accelopt.backends.cpu.remote import KernelHostDevice
    from accelopt.hardware.toolchain import compiler_for

    device = KernelHostDevice(compiler_for(settings.c_compiler()), env or dict(os.environ))
    try:
        x = device.upload(np.linspace(-3, 3, N, dtype=np.float32), into=device.empty((N,)))
        y = device.empty((N,), fill=np.nan)
        kernel = device.load(artifact, 2, threads=threads, memory_cap_bytes=1 << 30)
        facts = dict(device.isolation)
        kernel([x, y])
        return Outcome("ran", output=device.to_host(y).tolist(), facts=facts)
    except KernelError as exc:
        return Outcome(exc.status.value, str(exc))
    finally:
        device.close()
