"""The layers a Triton kernel's process applies to itself (``host.py`` calls them in order), with
the system calls Python's standard library does not wrap: Landlock, capabilities, seccomp.

Landlock and the capability bounding set act on the calling thread (and threads made after it):
they are applied while the process has one thread. Changing user is done by glibc on every thread.
The filter is installed on every thread at once (``SECCOMP_FILTER_FLAG_TSYNC``), failing closed.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import struct
from collections.abc import Iterable
from pathlib import Path

from accelopt.backends.containment import DROP_CAPABILITIES, DROP_NONE, NOBODY

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_SYS = {  # the same numbers on x86-64 and aarch64 (the unified table's)
    "landlock_create_ruleset": 444,
    "landlock_add_rule": 445,
    "landlock_restrict_self": 446,
}
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1

# Landlock's file-system rights (ABI 1: 0-12; refer 13, truncate 14, ioctl_dev 15).
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)
READ = READ_FILE | READ_DIR
WRITE = (1 << 13) - 1 - EXECUTE | (1 << 14)  # write, make, remove (a scratch folder), no exec
DEVICE = READ_FILE | WRITE_FILE | (1 << 15)  # a device file, its ioctls included


class ConfineError(RuntimeError):
    """A layer that must apply did not: the kernel is not run."""


def _syscall(number: int, *args: object) -> int:
    wide = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]  # full registers
    result = _libc.syscall(ctypes.c_long(number), *wide)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(result)


def _prctl(option: int, arg: int = 0) -> int:
    return int(
        _libc.prctl(
            option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
        )
    )


def die_with_parent() -> None:
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def no_core_dumps() -> None:
    """Not dumpable: no core file (a piped core_pattern ignores RLIMIT_CORE), and no other
    process of its user may trace it or read its memory."""
    _prctl(PR_SET_DUMPABLE, 0)


def limit(memory_bytes: int | None = None, files: int = 256) -> None:
    """No core dumps, few descriptors, the address space capped when asked (files: the
    worker's cap, inherited; Landlock lets it write none but its log)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = files if hard == resource.RLIM_INFINITY else min(files, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (cap, cap))
    if memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


# -- Landlock ----------------------------------------------------------------------------------
def landlock_abi() -> int:
    try:
        return _syscall(_SYS["landlock_create_ruleset"], None, 0, 1)
    except OSError:
        return 0


def _handled(abi: int) -> tuple[int, int, int, int]:
    """(file-system rights, network rights, scopes, the attribute's size) this ABI handles."""
    fs = (1 << 13) - 1 | (1 << 13 if abi >= 2 else 0) | (1 << 14 if abi >= 3 else 0)
    fs |= 1 << 15 if abi >= 5 else 0
    net = 3 if abi >= 4 else 0  # bind and connect TCP
    scoped = 3 if abi >= 6 else 0  # abstract UNIX sockets and signals outside the process
    return fs, net, scoped, 24 if abi >= 6 else 16 if abi >= 4 else 8


def restrict_paths(rules: Iterable[tuple[Path, int]]) -> int:
    """Allow only ``rules`` (path, rights) from now on: every other file-system access, TCP and
    (ABI 6) signals to other processes refused. Its ABI, or 0 where the system has none."""
    abi = landlock_abi()
    if abi < 1:
        return 0
    fs, net, scoped, size = _handled(abi)
    attr = ctypes.create_string_buffer(struct.pack("<QQQ", fs, net, scoped)[:size], size)
    ruleset = _syscall(_SYS["landlock_create_ruleset"], attr, size, 0)
    try:
        for path, rights in rules:
            _add_rule(ruleset, path, rights & fs)
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        _syscall(_SYS["landlock_restrict_self"], ruleset, 0)
    finally:
        os.close(ruleset)
    return abi


def _add_rule(ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # not on this system: nothing to allow
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        attr = ctypes.create_string_buffer(struct.pack("<Qi", rights, fd), 12)
        _syscall(_SYS["landlock_add_rule"], ruleset, 1, attr, 0)
    finally:
        os.close(fd)


# -- privileges --------------------------------------------------------------------------------
def drop_bounding_set() -> None:
    for cap in range(64):
        if _prctl(PR_CAPBSET_DROP, cap) != 0:
            break  # past the last capability: EINVAL
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)


def drop_privileges(mode: int, arch: str) -> str:
    """Give up root as ``containment.drop_mode`` says; what the process is now."""
    if mode == DROP_NONE or os.geteuid() != 0:
        return "unchanged"
    drop_bounding_set()
    if mode == DROP_CAPABILITIES:
        header = ctypes.create_string_buffer(struct.pack("<Ii", 0x20080522, 0), 8)
        none = ctypes.create_string_buffer(bytes(24), 24)
        _syscall(_SYS_CAPSET[arch], header, none)
        return "capabilities"
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)  # glibc: on every thread; every capability goes
    return "nobody"


# -- seccomp -----------------------------------------------------------------------------------
def install_filter(program: bytes, arch: str) -> None:
    """Install ``program`` on every thread (no_new_privs first), or raise."""
    count = len(program) // 8
    code = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("<HxxxxxxQ", count, ctypes.addressof(code))
    prog = ctypes.create_string_buffer(fprog, len(fprog))
    if _prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        raise ConfineError("no_new_privs could not be set")
    try:
        tid = _syscall(_SYS_SECCOMP[arch], SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, prog)
    except OSError as exc:
        raise ConfineError(f"the system call filter could not be installed: {exc}") from None
    if tid != 0:
        raise ConfineError(f"thread {tid} could not take the system call filter")
