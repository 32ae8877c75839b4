"""A Triton kernel's own process (``python -I -m accelopt.backends.triton.host SETUP CMD DONE``),
started by the worker (``kernel_host.py``) with an empty environment, one per evaluation.

Set-up (trusted: no kernel code exists yet), over the SETUP socket, JSON lines:
  - ``start``: Landlock (read the Python installation only; on a GPU its device files, a scratch
    folder, and Triton's ``ptxas``), then torch and Triton imported and warmed up (a built-in
    kernel launched under the torch guard, so that what Python imports lazily is imported now);
  - ``alloc``: a buffer: on the CPU a memory file the worker sent (its tensor is a view of the
    shared mapping); on a GPU a CUDA tensor, handed to the worker by its IPC handle;
  - ``contain``: privileges given up, the address space capped, the system call filter on every
    thread (``syscall_filter.py``); the facts are the answer, on the DONE pipe (the filter allows
    no other), and the socket is closed.
The worker checks every thread of this process, then sends the kernel's LOAD on the CMD pipe.
From there it runs the kernel's code: it imports the module (source held in memory, never a file)
and calls its launcher on the buffers each CALL names, answering on the DONE pipe. It decides
nothing: the worker reads the buffers, checks them and times the calls.
"""

from __future__ import annotations

import base64
import json
import linecache
import mmap
import os
import pickle
import socket
import sys
import traceback
import types
from pathlib import Path
from typing import Any

from accelopt.backends.triton import confine, protocol
from accelopt.backends.triton.syscall_filter import compute_filter, machine

SOURCE_PATH = "/accelopt-kernel/kernel.py"  # no such file: the source is in linecache


def kernel_error(exc: BaseException) -> str:
    """The exception in one message, with the kernel's own line where the traceback has one."""
    frames = [
        f"kernel.py line {f.lineno}: {(f.line or '').strip()}"
        for f in traceback.extract_tb(exc.__traceback__)
        if f.filename == SOURCE_PATH
    ]
    text = f"{type(exc).__name__}: {exc}".strip()
    if len(text) > protocol.ERROR_CHARS:
        text = text[: protocol.ERROR_CHARS] + " [...]"
    return text + (f" (at {frames[-1]})" if frames else "")


class Host:
    """This process's state: its buffers (by the worker's ids) and, once loaded, the launcher."""

    def __init__(self, setup: socket.socket, done_fd: int) -> None:
        self.setup, self.done_fd = setup, done_fd
        self.buffers: dict[int, Any] = {}
        self.gpu = False
        self.launcher: Any = None
        self.flush: Any = None
        self.source = ""
        self.facts: dict[str, str] = {}

    # -- set-up -------------------------------------------------------------------------------
    def start(self, request: dict[str, Any]) -> dict[str, Any]:
        self.gpu = bool(request["gpu"])
        confine.die_with_parent()
        confine.limit(files=int(request.get("files", 256)))
        rules = [(Path(p), confine.READ) for p in request["read"]]
        rules += [(Path(p), confine.WRITE) for p in request.get("write", ())]
        rules += [(Path(p), confine.READ_FILE | confine.EXECUTE) for p in request.get("exec", ())]
        rules += [(Path(p), confine.DEVICE) for p in request.get("devices", ())]
        abi = confine.restrict_paths(rules)
        if abi == 0 and request.get("require_landlock"):
            raise confine.ConfineError("Landlock is not available on this system")
        self.facts["landlock"] = str(abi)
        from accelopt.backends.triton import warmup  # torch and triton: after Landlock

        self.flush = warmup.prepare(self.gpu, request.get("cache_dir"))
        return {"ok": True, "landlock": abi}

    def alloc(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        import torch

        shape = tuple(request["shape"])
        if self.gpu:
            tensor = torch.empty(shape, dtype=torch.float32, device="cuda")
            from torch.multiprocessing.reductions import reduce_tensor

            handle = pickle.dumps(reduce_tensor(tensor)[1])
            self.buffers[request["id"]] = tensor
            return {"ok": True, "handle": base64.b64encode(handle).decode()}
        (fd,) = fds
        mapping = mmap.mmap(fd, request["bytes"], flags=mmap.MAP_SHARED)
        os.close(fd)
        count = int(request["count"])
        flat = torch.frombuffer(mapping, dtype=torch.float32, count=count, offset=request["offset"])
        self.buffers[request["id"]] = flat.view(shape)
        return {"ok": True}

    def contain(self, request: dict[str, Any], statm: int, status: int) -> dict[str, Any]:
        """Every layer that remains, in an order that keeps each possible; the facts."""
        self.source = request["source"]
        arch = machine()
        fields = dict(
            x.partition(":")[::2] for x in os.pread(status, 1 << 14, 0).decode().splitlines()
        )
        os.close(status)
        inherited = int(fields.get("Seccomp_filters", "0").strip() or 0)
        self.facts["privileges"] = confine.drop_privileges(int(request["drop"]), arch)
        pages = int(os.pread(statm, 64, 0).split()[0])
        os.close(statm)
        confine.limit(pages * mmap.PAGESIZE + int(request["memory_cap"]))
        program = compute_filter(os.getpid(), self.done_fd, self.gpu, arch)
        confine.die_with_parent()  # a change of user cleared it
        confine.no_core_dumps()
        confine.install_filter(program, arch)
        filters = str(inherited + 1)
        self.facts |= {"seccomp": "1", "filters": filters, "environment": "empty"}
        return {"ok": True, "facts": self.facts}

    # -- the kernel's code (untrusted from here) ----------------------------------------------
    def load(self) -> tuple[int, str]:
        name = "accelopt_triton_kernel"
        module = types.ModuleType(name)
        module.__file__ = SOURCE_PATH
        lines = self.source.splitlines(keepends=True)
        linecache.cache[SOURCE_PATH] = (len(self.source), None, lines, SOURCE_PATH)
        sys.modules[name] = module  # Triton finds a kernel's globals through its module
        try:
            exec(compile(self.source, SOURCE_PATH, "exec"), module.__dict__)
        except BaseException as exc:
            return protocol.LOAD_FAILED, kernel_error(exc)
        launcher = module.__dict__.get("kernel")
        if not callable(launcher):
            return protocol.LOAD_FAILED, (
                "the module defines no function named `kernel` (the launcher "
                "kernel(*inputs, *outputs))"
            )
        self.launcher = launcher
        return protocol.OK, ""

    def call(self, calls: list[tuple[int, ...]]) -> tuple[int, str]:
        from accelopt.backends.triton import guard

        for ids in calls:
            tensors = [self.buffers[i] for i in ids]
            if self.flush is not None:
                self.flush()
            watch = guard.TorchOpGuard()
            try:
                with watch:
                    self.launcher(*tensors)
            except Exception as exc:
                if not watch.refused:
                    return protocol.FAILED, kernel_error(exc)
            if watch.refused:
                return protocol.REFUSED, guard.refused_message(watch.refused)
        if self.gpu:
            import torch

            try:
                torch.cuda.synchronize()
            except Exception as exc:
                return protocol.FAULTED, f"the kernel faulted on the GPU: {exc}"
        return protocol.OK, ""


def _set_up(host: Host, statm: int, status: int) -> None:
    """Answer set-up requests until ``contain``; then the socket is closed."""
    while True:
        request, fds = protocol.receive(host.setup)
        if request is None:
            os._exit(protocol.EXIT_SETUP)
        op = request.get("op")
        try:
            if op == "start":
                answer = host.start(request)
            elif op == "alloc":
                answer = host.alloc(request, fds)
            elif op == "contain":
                answer = host.contain(request, statm, status)
            else:
                answer = {"ok": False, "error": f"unknown request {op!r}"}
        except Exception as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        if op == "contain" and answer["ok"]:  # under the filter: the answer pipe only
            os.write(host.done_fd, protocol.answer(0, protocol.OK, json.dumps(answer["facts"])))
            host.setup.close()
            return
        protocol.send(host.setup, answer)
        if op == "contain":
            os._exit(protocol.EXIT_SETUP)


def _serve(host: Host, cmd_fd: int) -> None:
    while True:
        request = protocol.read_command(cmd_fd)
        if request is None or request.op == protocol.OP_EXIT:
            os._exit(0)
        if request.op == protocol.OP_LOAD:
            status, text = host.load()
        else:
            status, text = host.call(request.calls)
        os.write(host.done_fd, protocol.answer(request.sequence, status, text))


def main(argv: list[str]) -> None:
    setup_fd, cmd_fd, done_fd = (int(a) for a in argv[1:4])
    statm, status = (
        os.open(f"/proc/self/{name}", os.O_RDONLY | os.O_CLOEXEC) for name in ("statm", "status")
    )  # fmt: skip  (before Landlock)
    sys.dont_write_bytecode = True
    import faulthandler

    faulthandler.register(confine.signal.SIGSYS, file=sys.stderr, all_threads=False, chain=True)
    host = Host(socket.socket(fileno=setup_fd), done_fd)
    _set_up(host, statm, status)
    _serve(host, cmd_fd)


if __name__ == "__main__":
    main(sys.argv)
