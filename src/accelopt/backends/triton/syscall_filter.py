"""The system calls a Triton kernel's process may make once its set-up is over, as a seccomp-bpf
program built here (the C kernel host builds its own in ``kernel_host.c``; this one is for CPython).

By then torch, Triton and its interpreter are imported and warmed up by trusted code, so what is
left is what a launcher and an interpreted kernel make: memory, threads, futexes, clocks, reading
the files Landlock lets it read (Python imports lazily), and writing to its log and its answer
pipe. Nothing that creates or writes a file, connects, starts a process, signals another process,
or changes limits or signal handlers. Arguments are checked where a call has side effects
(``openat`` flags, ``fcntl`` commands, ``clone`` flags, ``tgkill``'s target, ``write``'s
descriptor). Anything else traps (SIGSYS: ``faulthandler`` writes the Python line that made the
call to the log, then resets the signal's action, and that call kills the process; a kernel that
blocks SIGSYS dies of it at once). On a GPU, CUDA's ioctls are allowed, and so are the calls
Triton needs to run its own ``ptxas`` (Landlock lets it execute that one file and nothing else).
"""

from __future__ import annotations

import platform
import struct
from dataclasses import dataclass, field

# struct seccomp_data: nr (u32) at 0, arch (u32) at 4, instruction pointer at 8, args at 16.
_NR, _ARCH, _ARGS = 0, 4, 16
_LD_W_ABS, _JEQ_K, _JSET_K, _RET_K, _ALU_AND_K = 0x20, 0x15, 0x45, 0x06, 0x54
RET_KILL_PROCESS, RET_TRAP, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00030000, 0x00050000, 0x7FFF0000
ENOSYS, ENOTTY = 38, 25
# O_WRONLY O_RDWR O_CREAT O_TRUNC O_APPEND O_TMPFILE
O_WRITES = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000 | 0o20000000
F_GETFD, F_SETFD, F_GETFL = 1, 2, 3
CLONE_THREAD = 0x00010000
CLONE_NAMESPACES = 0x7E020080  # NEWNS NEWCGROUP NEWUTS NEWIPC NEWUSER NEWPID NEWNET, NEWTIME

ARCHES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": dict(
        read=0,
        write=1,
        close=3,
        fstat=5,
        lseek=8,
        mmap=9,
        mprotect=10,
        munmap=11,
        brk=12,
        rt_sigprocmask=14,
        rt_sigreturn=15,
        ioctl=16,
        pread64=17,
        sched_yield=24,
        mremap=25,
        madvise=28,
        nanosleep=35,
        getpid=39,
        clone=56,
        execve=59,
        exit=60,
        wait4=61,
        uname=63,
        fcntl=72,
        getcwd=79,
        gettimeofday=96,
        sysinfo=99,
        getuid=102,
        getgid=104,
        geteuid=107,
        getegid=108,
        getppid=110,
        sched_getparam=143,
        sched_getscheduler=145,
        gettid=186,
        futex=202,
        sched_setaffinity=203,
        sched_getaffinity=204,
        getdents64=217,
        restart_syscall=219,
        clock_gettime=228,
        clock_getres=229,
        clock_nanosleep=230,
        exit_group=231,
        tgkill=234,
        openat=257,
        newfstatat=262,
        readlinkat=267,
        ppoll=271,
        set_robust_list=273,
        get_robust_list=274,
        dup3=292,
        pipe2=293,
        getcpu=309,
        getrandom=318,
        membarrier=324,
        statx=332,
        rseq=334,
        clone3=435,
        futex_waitv=449,
        rt_sigaction=13,
    ),
    "aarch64": dict(
        getcwd=17,
        dup3=24,
        fcntl=25,
        ioctl=29,
        openat=56,
        close=57,
        pipe2=59,
        getdents64=61,
        lseek=62,
        read=63,
        write=64,
        pread64=67,
        ppoll=73,
        readlinkat=78,
        newfstatat=79,
        fstat=80,
        exit=93,
        exit_group=94,
        futex=98,
        set_robust_list=99,
        get_robust_list=100,
        nanosleep=101,
        clock_gettime=113,
        clock_getres=114,
        clock_nanosleep=115,
        sched_setaffinity=122,
        sched_getaffinity=123,
        sched_yield=124,
        sched_getscheduler=120,
        sched_getparam=121,
        restart_syscall=128,
        tgkill=131,
        rt_sigprocmask=135,
        rt_sigreturn=139,
        rt_sigaction=134,
        uname=160,
        getcpu=168,
        gettimeofday=169,
        getpid=172,
        getppid=173,
        getuid=174,
        geteuid=175,
        getgid=176,
        getegid=177,
        gettid=178,
        sysinfo=179,
        brk=214,
        munmap=215,
        mremap=216,
        clone=220,
        execve=221,
        mmap=222,
        mprotect=226,
        madvise=233,
        wait4=260,
        getrandom=278,
        membarrier=283,
        statx=291,
        rseq=293,
        clone3=435,
        futex_waitv=449,
    ),
}

# What any launcher and interpreted kernel may call, whatever its arguments.
PLAIN = (
    "read",
    "pread64",
    "lseek",
    "close",
    "fstat",
    "newfstatat",
    "statx",
    "getdents64",
    "getcwd",
    "readlinkat",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "brk",
    "futex",
    "futex_waitv",
    "set_robust_list",
    "get_robust_list",
    "sched_yield",
    "sched_getaffinity",
    "sched_getparam",
    "sched_getscheduler",
    "rt_sigprocmask",
    "rt_sigreturn",
    "exit",
    "exit_group",
    "gettid",
    "getpid",
    "getppid",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "clock_nanosleep",
    "nanosleep",
    "getrandom",
    "getcpu",
    "restart_syscall",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "sysinfo",
    "rseq",
    "membarrier",
    "uname",
)
# What CUDA and Triton's ptxas need besides (Landlock bounds which files and which program).
GPU_PLAIN = ("ioctl", "execve", "wait4", "pipe2", "dup3", "ppoll")


class UnknownArchitecture(RuntimeError):
    """No system call table for this machine: the process is not run (fail closed)."""


def machine() -> str:
    arch = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch.lower(), arch)


@dataclass
class _Program:
    numbers: dict[str, int]
    code: list[tuple[int, int, int, int]] = field(default_factory=list)

    def emit(self, code: int, k: int, jt: int = 0, jf: int = 0) -> None:
        self.code.append((code, jt, jf, k & 0xFFFFFFFF))

    def load_nr(self) -> None:
        self.emit(_LD_W_ABS, _NR)

    def allow(self, name: str, action: int = RET_ALLOW) -> None:
        if name in self.numbers:
            self.emit(_JEQ_K, self.numbers[name], jt=0, jf=1)
            self.emit(_RET_K, action)

    def allow_if(self, name: str, arg: int, values: tuple[int, ...]) -> None:
        """``name`` when the low 32 bits of its argument ``arg`` are one of ``values``."""
        if name not in self.numbers:
            return
        self.emit(_JEQ_K, self.numbers[name], jt=0, jf=len(values) + 3)
        self.emit(_LD_W_ABS, _ARGS + 8 * arg)
        for i, value in enumerate(values):
            self.emit(_JEQ_K, value, jt=len(values) - i, jf=0)
        self.emit(0x05, len(values) and 1)  # JA: over the allow, to reload the number
        self.emit(_RET_K, RET_ALLOW)
        self.load_nr()

    def allow_if_masked(self, name: str, arg: int, mask: int, want: int) -> None:
        """``name`` when the low 32 bits of argument ``arg``, masked, equal ``want``."""
        if name not in self.numbers:
            return
        self.emit(_JEQ_K, self.numbers[name], jt=0, jf=5)
        self.emit(_LD_W_ABS, _ARGS + 8 * arg)
        self.emit(_ALU_AND_K, mask)
        self.emit(_JEQ_K, want, jt=0, jf=1)
        self.emit(_RET_K, RET_ALLOW)
        self.load_nr()

    def pack(self) -> bytes:
        return b"".join(struct.pack("<HBBI", *ins) for ins in self.code)


def compute_filter(pid: int, answer_fd: int, gpu: bool, arch: str | None = None) -> bytes:
    """The program (``struct sock_filter`` array) for a kernel's process ``pid`` whose answers go
    to ``answer_fd``; anything it does not allow traps."""
    arch = arch or machine()
    if arch not in ARCHES:
        raise UnknownArchitecture(f"no system call table for {arch} (x86_64 and aarch64 known)")
    p = _Program(_NUMBERS[arch])
    p.emit(_LD_W_ABS, _ARCH)
    p.emit(_JEQ_K, ARCHES[arch], jt=1, jf=0)
    p.emit(_RET_K, RET_KILL_PROCESS)
    p.load_nr()
    for name in PLAIN + (GPU_PLAIN if gpu else ()):
        p.allow(name)
    if gpu:  # ptxas: a child process, never in a new namespace; writes where Landlock allows
        p.allow_if_masked("clone", 0, CLONE_NAMESPACES, 0)
        p.allow("write")
        p.allow("openat")
    else:
        p.allow_if("write", 0, (1, 2, answer_fd))
        p.allow_if_masked("openat", 2, O_WRITES, 0)  # read-only opens (Landlock: which files)
        p.allow_if_masked("clone", 0, CLONE_THREAD, CLONE_THREAD)  # threads, never processes
        p.allow("ioctl", RET_ERRNO | ENOTTY)  # isatty() on a file Python opens
    p.allow_if("fcntl", 1, (F_GETFD, F_SETFD, F_GETFL))
    p.allow_if("tgkill", 0, (pid,))  # abort() signals its own process
    p.allow("sched_setaffinity", RET_ERRNO | 0)  # answered, not done: it stays where it is timed
    p.allow("clone3", RET_ERRNO | ENOSYS)  # glibc then uses clone, whose flags are checked
    # faulthandler's SIGSYS handler writes the Python line, then restores the default action to
    # die by it: that call ends the process. So does any other change of a signal's action.
    p.allow("rt_sigaction", RET_KILL_PROCESS)
    p.emit(_RET_K, RET_TRAP)
    return p.pack()
