"""Evaluates Triton kernels as a worker does (``EvaluationRun``: the kernel's own process, the
checks in this one), with the static checks switched off: each kernel stands for one that got past
them, so the process's layers must hold alone. Usage: RESULTS LOCK KERNEL.py... ; one JSON line
per kernel in RESULTS (``status`` None: the worker found nothing wrong, which the parent scores
PASSED); what the kernels print goes to this process's stdout and stderr."""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
from pathlib import Path

from accelopt.backends.triton.backend import TritonBackend
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.worker.harness import EvaluationRun
from accelopt.profiling.worker.protocol import Channel, EvaluateRequest, KernelSource

TritonBackend.check = lambda self, source: None  # type: ignore[method-assign]


def _drain(sock: socket.socket) -> None:
    while sock.recv(1 << 16):
        pass


def evaluate(path: Path, lock: str) -> dict[str, object]:
    request = EvaluateRequest(
        backend="triton", problem={"name": "silu"}, workload="tiny",
        config=EvalConfig(check_only=True, seeds=2), seeds=[11, 12], threads=1, llc_bytes=None,
        lock_path=lock, kernel=KernelSource(source=path.read_text(), name=path.stem),
    )  # fmt: skip
    ours, theirs = socket.socketpair()
    threading.Thread(target=_drain, args=(theirs,), daemon=True).start()
    result = EvaluationRun(request, Channel(ours)).execute()
    ours.close()
    status = result.status.value if result.status is not None else None
    return {"name": path.stem, "status": status, "error": result.error,
            "max_rel_err": result.max_rel_err}  # fmt: skip


def main() -> None:
    results, lock, *kernels = sys.argv[1:]
    os.chdir(tempfile.mkdtemp())  # a worker builds in its scratch folder
    with open(results, "w") as out:
        for kernel in kernels:
            out.write(json.dumps(evaluate(Path(kernel), lock)) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
