/* accelopt-kernel-host: the only process that runs a C kernel's code.
 *
 * Started by a worker for one evaluation and killed after it. The worker holds the verdict: it
 * writes the inputs, reads the outputs and the guard regions (process_vm_readv/writev), and times
 * each batch of calls with its own clock. This process only allocates buffers, loads the kernel
 * and calls it when told; once the kernel is loaded it can make none of the system calls that
 * would reach a file, the network, another process or the worker's channel (seccomp-bpf below).
 *
 * Every thread is contained, not only the one that calls the kernel (contain() below): root's
 * privileges are given up and Landlock applied while the process has one thread; the OpenMP
 * pool is then made by this trusted code (libgomp binds it as OMP_PROC_BIND/OMP_PLACES say), so
 * its threads inherit both; each seccomp filter is installed on every thread at once
 * (SECCOMP_FILTER_FLAG_TSYNC, failing closed). Threads a kernel makes later inherit all of it.
 * The worker then reads /proc/<pid>/task/<tid>/status and refuses to call the kernel if any thread
 * is less contained than it should be (containment.py).
 *
 * File descriptors, set up by the worker:
 *   0 /dev/null, 1 and 2 the evaluation's log (what a kernel prints),
 *   argv[1] a socket for the set-up conversation (text lines; closed once the kernel is loaded),
 *   argv[2] commands (read end of a pipe), argv[3] "done" bytes (write end of a pipe).
 *
 * Set-up lines from the worker, each answered by one line:
 *   alloc <bytes> <guard> <fence> <offset>      -> "ok <buffer address> <before> <after>"
 *   calibrate <n>   n empty commands on the pipes -> "ok" (the harness's own round trip)
 *   probe <threads> <drop>                      -> "isolation <facts>", then waits for the
 *                                                  worker to close the command pipe: what the
 *                                                  sandbox below can apply on this system
 *   load <threads> <memory cap bytes> <require> <drop> <path> -> "loaded <facts>" | "error <why>"
 *                                                  (require 1: no filter, no kernel; drop: how
 *                                                  root gives up root, below)
 * then binary commands on the command pipe: {u32 op, u32 calls, u32 args, u32 sequence} and
 * calls*args u64 addresses; after each command one byte on the done pipe: the sequence's low
 * byte (a kernel that writes there is out of step with the worker, which kills it).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <omp.h>

static int SETUP_FD = -1, CMD_FD = -1, DONE_FD = -1; /* from argv */
#define MAX_ARGS 32
#define MAX_CALLS 256
#define NOBODY 65534
#define EXIT_FORBIDDEN 97
#define EXIT_PROTOCOL 98
#define OP_CALL 1
#define OP_NOOP 2
#define OP_EXIT 3

#if defined(__x86_64__)
#define AUDIT_ARCH_HERE AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_HERE AUDIT_ARCH_AARCH64
#else
#error "accelopt-kernel-host knows the seccomp architecture of x86-64 and aarch64 only"
#endif

/* ---- system call names, for the message when a kernel makes a forbidden one ------------- */
struct named { long nr; const char *name; };
#define N(x) {SYS_##x, #x},
static const struct named NAMES[] = {
#ifdef SYS_open
    N(open) N(creat) N(fork) N(vfork) N(access) N(unlink) N(rename) N(mkdir) N(chmod)
#endif
    N(openat) N(read) N(write) N(socket) N(connect) N(bind) N(listen) N(accept4) N(sendto)
    N(recvfrom) N(sendmsg) N(recvmsg) N(socketpair) N(execve) N(execveat) N(clone) N(kill)
    N(tgkill) N(ptrace) N(setns) N(unshare) N(mount) N(chdir) N(fchdir) N(unlinkat) N(renameat)
    N(mkdirat) N(fchmodat) N(prctl) N(setrlimit) N(prlimit64) N(rt_sigaction) N(ioctl) N(dup)
    N(dup3) N(pipe2) N(memfd_create) N(process_vm_readv) N(process_vm_writev) N(setuid)
    N(setgid) N(setresuid) N(bpf) N(perf_event_open) N(seccomp) N(keyctl) N(ftruncate)
    N(fcntl) N(lseek) N(pread64) N(pwrite64) N(getdents64) N(readlinkat)
    N(newfstatat) N(fstat)
};

static const char *syscall_name(long nr) {
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (NAMES[i].nr == nr) return NAMES[i].name;
    return "?";
}

static void put(const char *s) { (void)!write(2, s, strlen(s)); }

static void on_sigsys(int sig, siginfo_t *info, void *context) {
    (void)sig; (void)context;
    char number[24];
    snprintf(number, sizeof number, "%d", info->si_syscall);
    put("\naccelopt-kernel-host: forbidden system call ");
    put(syscall_name(info->si_syscall));
    put(" (");
    put(number);
    put(")\n");
    _exit(EXIT_FORBIDDEN);
}

/* ---- seccomp-bpf ------------------------------------------------------------------------ */
#define ARG_LO(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define MAX_FILTER 512

struct filter { struct sock_filter code[MAX_FILTER]; unsigned short n; };

static void emit(struct filter *f, struct sock_filter ins) {
    if (f->n >= MAX_FILTER) { put("accelopt-kernel-host: seccomp filter too long\n"); _exit(2); }
    f->code[f->n++] = ins;
}

static void begin(struct filter *f) {
    f->n = 0;
    emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_HERE, 1, 0));
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
    emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
#if defined(__x86_64__)
    /* x32 system calls (bit 30) reach the same kernel entry points under other numbers */
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1));
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#endif
}

static void allow(struct filter *f, long nr) {
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1));
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
}

static void answer(struct filter *f, long nr, int err) {
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1));
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)));
}

/* Allow nr when its argument `arg` (low 32 bits, high ones zero) is one of values[0..count). */
static void allow_if_arg(struct filter *f, long nr, int arg, const uint32_t *values, int count) {
    /* layout: JEQ nr; LD lo; (JEQ v -> ALLOW)*count; LD nr; (fall through to next rule) */
    int body = 2 + 2 * count + 2;
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, (uint8_t)body));
    emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(arg) + 4));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, (uint8_t)(2 * count + 1)));
    emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(arg)));
    for (int i = 0; i < count; i++) {
        emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, values[i], 0, 1));
        emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    }
    emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
}

/* Allow nr when (argument `arg` & mask) == want (low 32 bits). */
static void allow_if_masked(struct filter *f, long nr, int arg, uint32_t mask, uint32_t want) {
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 5));
    emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(arg)));
    emit(f, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, mask));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, want, 0, 1));
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
}

/* Allow nr when each argument args[i] equals values[i], all 64 bits of it. */
static void allow_if_args(struct filter *f, long nr, int n, const int *args, const uint64_t *values) {
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, (uint8_t)(4 * n + 2)));
    for (int i = 0; i < n; i++) {
        int at = 1 + 4 * i; /* this pair's first instruction; LD nr is at 4n + 2 */
        emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(args[i]) + 4));
        emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(values[i] >> 32), 0,
                                             (uint8_t)(4 * n + 2 - (at + 2))));
        emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(args[i])));
        emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)values[i], 0,
                                             (uint8_t)(4 * n + 2 - (at + 4))));
    }
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
}

/* Installed on every thread of the process at once (TSYNC): 0, or -1 when it failed (a positive
 * answer names a thread that could not take it: nothing was installed, fail closed too). */
static int install_program(const struct sock_fprog *prog) {
    long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, prog);
    if (rc > 0) errno = EAGAIN;
    return rc == 0 ? 0 : -1;
}

static int install(struct filter *f, uint32_t otherwise) {
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, otherwise));
    struct sock_fprog prog = {.len = f->n, .filter = f->code};
    return install_program(&prog);
}

/* What an honest kernel's code (libc, libm, libgomp) needs once it is loaded: memory, threads,
 * futexes, clocks, and writing to its log. Nothing that opens, connects, spawns or signals. */
static void allow_compute(struct filter *f, int self) {
    static const long plain[] = {
        SYS_mmap, SYS_munmap, SYS_mremap, SYS_mprotect, SYS_madvise, SYS_brk, SYS_futex,
        SYS_set_robust_list, SYS_get_robust_list, SYS_sched_yield, SYS_sched_getaffinity,
        SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_exit, SYS_exit_group, SYS_gettid, SYS_getpid,
        SYS_clock_gettime, SYS_clock_getres, SYS_gettimeofday, SYS_clock_nanosleep,
        SYS_nanosleep, SYS_getrandom, SYS_getcpu, SYS_restart_syscall, SYS_sched_getparam,
        SYS_sched_getscheduler, SYS_getuid, SYS_geteuid, SYS_getgid, SYS_getegid, SYS_getppid,
        SYS_sysinfo, /* load averages: libgomp under OMP_DYNAMIC (getloadavg) */
#ifdef SYS_rseq
        SYS_rseq,
#endif
#ifdef SYS_futex_waitv
        SYS_futex_waitv,
#endif
#ifdef SYS_membarrier
        SYS_membarrier,
#endif
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) allow(f, plain[i]);
    const uint32_t logs[] = {1, 2, (uint32_t)DONE_FD};
    allow_if_arg(f, SYS_write, 0, logs, 3);
    allow_if_arg(f, SYS_writev, 0, logs, 3);
    allow_if_arg(f, SYS_fstat, 0, logs, 2);
    allow_if_arg(f, SYS_newfstatat, 0, logs, 2);
    const uint32_t commands[] = {(uint32_t)CMD_FD};
    allow_if_arg(f, SYS_read, 0, commands, 1);
    uint32_t me[] = {(uint32_t)self};
    allow_if_arg(f, SYS_tgkill, 0, me, 1); /* abort() signals its own process */
    /* any task's affinity, its own included: answered "done" and not done. libgomp binds the
     * threads it makes (the pool is made before the filters, bound then; a kernel asking for more
     * threads later gets them unbound rather than a crash); no kernel may move another process,
     * nor leave the CPUs the worker binds it to while it is timed (placement.py: a kernel that
     * moved off its neighbour would beat the reference that stayed). */
    answer(f, SYS_sched_setaffinity, 0);
    /* descriptor flags only: no F_SETOWN/F_SETSIG/O_ASYNC (signals to a chosen process), no
     * leases, locks or pipe resizing */
    static const uint32_t harmless_fcntl[] = {F_GETFD, F_SETFD, F_GETFL};
    allow_if_arg(f, SYS_fcntl, 1, harmless_fcntl, 3);
    allow_if_masked(f, SYS_clone, 0, CLONE_THREAD, CLONE_THREAD); /* threads, never processes */
#ifdef SYS_clone3
    answer(f, SYS_clone3, ENOSYS); /* glibc then uses clone, whose flags the filter can read */
#endif
    answer(f, SYS_ioctl, ENOTTY); /* isatty() on the log */
}

/* The compute filter, built before the loader's filter is installed, in a page of its own
 * made read-only and sealed (mseal, Linux 6.10+: no mprotect, munmap, mremap or mmap over it):
 * the loader's filter lets seccomp install this program and no other, so code that ran at load
 * time can neither install a filter of its own (one that answers the next seccomp call with a
 * fake success) nor change this one. */
static const struct sock_fprog *running;
static int running_sealed;

static void prepare_running(void) {
    static struct filter f;
    begin(&f);
    allow_compute(&f, getpid());
    allow_if_arg(&f, SYS_write, 0, (const uint32_t[]){(uint32_t)SETUP_FD}, 1); /* "loaded" */
    allow_if_arg(&f, SYS_close, 0, (const uint32_t[]){(uint32_t)SETUP_FD}, 1);
    emit(&f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP));
    size_t bytes = sizeof(struct sock_fprog) + f.n * sizeof(struct sock_filter);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = (bytes + page - 1) / page * page;
    void *memory = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) { put("accelopt-kernel-host: no page for the filter\n"); _exit(2); }
    struct sock_fprog *prog = memory;
    struct sock_filter *code = (struct sock_filter *)(prog + 1);
    memcpy(code, f.code, f.n * sizeof(struct sock_filter));
    prog->len = f.n;
    prog->filter = code;
    if (mprotect(memory, size, PROT_READ) != 0) _exit(2);
    running_sealed = syscall(462 /* mseal */, memory, size, 0ul) == 0;
    running = prog;
}

static int sandbox_for_running(void) { return install_program(running); }

/* While the kernel's object is loaded (no kernel code runs then: the object checks refuse
 * constructors and ifuncs; should one run anyway, this is all it gets): what the dynamic loader
 * needs to map one file, opened read-only (Landlock, where the system has it, lets it open the
 * kernel's object and nothing else), and the one seccomp call that installs the compute filter
 * on every thread. Privileges, rlimits and signal handlers were all set before this filter. */
static int sandbox_for_loading(void) {
    static struct filter f;
    begin(&f);
    allow_compute(&f, getpid());
    static const long loader[] = {
        SYS_read, SYS_pread64, SYS_close, SYS_fstat, SYS_newfstatat, SYS_lseek,
    };
    for (size_t i = 0; i < sizeof loader / sizeof loader[0]; i++) allow(&f, loader[i]);
    /* seccomp: only to install the compute filter, from its sealed page (prepare_running) */
    static const int args[] = {0, 1, 2};
    const uint64_t values[] = {SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
                               (uint64_t)(uintptr_t)running};
    allow_if_args(&f, SYS_seccomp, 3, args, values);
    allow_if_arg(&f, SYS_write, 0, (const uint32_t[]){(uint32_t)SETUP_FD}, 1);
    /* open only for reading: O_ACCMODE, O_CREAT, O_TRUNC clear */
    allow_if_masked(&f, SYS_openat, 2, O_ACCMODE | O_CREAT | O_TRUNC | O_TMPFILE, 0);
#ifdef SYS_open
    allow_if_masked(&f, SYS_open, 1, O_ACCMODE | O_CREAT | O_TRUNC | O_TMPFILE, 0);
#endif
    return install(&f, SECCOMP_RET_TRAP);
}

/* ---- set-up ----------------------------------------------------------------------------- */
static FILE *setup_in;

static void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof line) n = sizeof line - 1;
    line[n++] = '\n';
    if (write(SETUP_FD, line, (size_t)n) != n) _exit(EXIT_PROTOCOL);
}

static long page_size;

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* [fence PROT_NONE][guard + offset][buffer][guard, to a page boundary][fence PROT_NONE] */
static void do_alloc(size_t bytes, size_t guard, size_t fence, size_t offset) {
    guard += offset; /* where in its page the buffer starts (64-byte multiples, chosen by the worker) */
    size_t usable = round_up(guard + bytes + guard - offset, (size_t)page_size);
    fence = round_up(fence, (size_t)page_size);
    char *block = mmap(NULL, fence + usable + fence, fence ? PROT_NONE : PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (block == MAP_FAILED) { reply("error mmap of %zu bytes failed: %s", usable, strerror(errno)); return; }
    char *start = block + fence;
    if (fence && mprotect(start, usable, PROT_READ | PROT_WRITE) != 0) {
        reply("error mprotect failed: %s", strerror(errno));
        return;
    }
    if (usable >= (4u << 20)) madvise(start, usable, MADV_HUGEPAGE); /* as NumPy does */
    /* not touched here: the worker writes every byte (guards, inputs, NaN outputs), which faults
     * the pages in before any call */
    char *buffer = start + guard;
    reply("ok %llu %zu %zu", (unsigned long long)(uintptr_t)buffer, guard, usable - guard - bytes);
}

typedef void (*kernel_fn)();
static kernel_fn kernel;
static void noop(void) {}

/* How a root worker's kernel process gives up root (the worker chooses: it must still reach the
 * process's memory, which takes CAP_SYS_PTRACE for another user's process):
 * DROP_TO_NOBODY: become nobody (65534), losing every capability;
 * DROP_CAPABILITIES: stay uid 0, with no capability left (effective, permitted, inheritable,
 *   ambient, bounding), as in a container that withholds CAP_SYS_PTRACE from root. */
#define DROP_NONE 0
#define DROP_TO_NOBODY 1
#define DROP_CAPABILITIES 2

static void drop_bounding_set(void) {
    for (int cap = 0; cap < 64; cap++) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0); /* past the last: EINVAL */
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

static int drop_capabilities(void) {
    drop_bounding_set();
    struct { uint32_t version; int pid; } header = {0x20080522 /* _LINUX_CAPABILITY_VERSION_3 */, 0};
    struct { uint32_t effective, permitted, inheritable; } none[2] = {{0, 0, 0}, {0, 0, 0}};
    return (int)syscall(SYS_capset, &header, none);
}

static int drop_privileges(int mode) {
    if (geteuid() != 0 || mode == DROP_NONE) return 0;
    if (mode == DROP_CAPABILITIES) return drop_capabilities();
    drop_bounding_set(); /* nobody holds none either: every thread reads CapBnd 0 */
    if (syscall(SYS_setgroups, 0, NULL) != 0) return -1;
    if (setresgid(NOBODY, NOBODY, NOBODY) != 0) return -1;
    return setresuid(NOBODY, NOBODY, NOBODY);
}

/* RLIMIT_AS: what is mapped now (read from /proc/self/statm, opened before Landlock) plus
 * `extra`. Set once the thread pool exists, so its stacks count as harness, not kernel. */
static void cap_memory(int statm, unsigned long long extra) {
    char text[64] = {0};
    unsigned long long pages = 0;
    if (statm >= 0 && pread(statm, text, sizeof text - 1, 0) > 0) pages = strtoull(text, NULL, 10);
    if (statm >= 0) close(statm);
    if (!pages) return;
    struct rlimit limit = {.rlim_cur = pages * (unsigned long long)page_size + extra};
    limit.rlim_max = limit.rlim_cur;
    setrlimit(RLIMIT_AS, &limit);
}

/* ---- Landlock --------------------------------------------------------------------------- */
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#define LL_VERSION 1u           /* LANDLOCK_CREATE_RULESET_VERSION */
#define LL_RULE_PATH_BENEATH 1
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ull << 0)
#define LL_SCOPE_SIGNAL (1ull << 1)

struct ll_ruleset { uint64_t fs, net, scoped; }; /* the ABI 6 layout; older ABIs read a prefix */

static int landlock_abi;     /* 0: none applied */
static int landlock_errno;   /* why not, when landlock_abi is 0 */

/* Every file-system access handled, and no rule: no file on any mounted file system can be
 * opened (the kernel's object is loaded from a sealed copy in memory, which has no path).
 * Network: no TCP bind or connect (ABI 4). Scopes (ABI 6): no signal to a process outside this
 * one (SIGIO/SIGURG from a descriptor's owner included), no abstract UNIX socket outside.
 * Applied to the calling thread, with one thread in the process: the pool inherits it. */
static void restrict_paths(void) {
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_VERSION);
    if (abi < 1) { landlock_errno = errno; return; }
    uint64_t fs = (1ull << 13) - 1;                 /* ABI 1: execute .. make_sym */
    if (abi >= 2) fs |= 1ull << 13;                 /* refer */
    if (abi >= 3) fs |= 1ull << 14;                 /* truncate */
    if (abi >= 5) fs |= 1ull << 15;                 /* ioctl_dev */
    struct ll_ruleset attr = {fs, abi >= 4 ? 3u : 0u, abi >= 6 ? LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL : 0u};
    size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 16 : 8;
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0u);
    if (ruleset < 0) { landlock_errno = errno; return; }
    if (syscall(SYS_landlock_restrict_self, ruleset, 0u) == 0) landlock_abi = (int)abi;
    else landlock_errno = errno;
    close(ruleset);
}

/* The kernel's object, copied (while this process may still read the worker's files) into a
 * sealed memory file: what is loaded is what was checked, whoever the process becomes. */
static int copy_object(const char *path, char *name, size_t name_size) {
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0) return -1;
    int fd = memfd_create("accelopt-kernel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    char buffer[1 << 16];
    ssize_t n = 0;
    while (fd >= 0 && (n = read(in, buffer, sizeof buffer)) > 0)
        if (write(fd, buffer, (size_t)n) != n) n = -1;
    int saved = errno;
    close(in);
    if (fd < 0 || n < 0) { if (fd >= 0) close(fd); errno = saved; return -1; }
    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    snprintf(name, name_size, "/proc/self/fd/%d", fd);
    return fd;
}

/* ---- containing every thread ------------------------------------------------------------ */
/* The libraries a kernel may need (objects.ALLOWED_LIBRARIES) loaded now, while files can be
 * opened: the kernel's DT_NEEDED entries then name objects already in the process. */
static void preload_libraries(void) {
    static const char *const libraries[] = {"libm.so.6", "libmvec.so.1", "libgomp.so.1", "libgcc_s.so.1"};
    for (size_t i = 0; i < sizeof libraries / sizeof libraries[0]; i++)
        dlopen(libraries[i], RTLD_NOW | RTLD_GLOBAL); /* absent on this system: never needed */
}

/* The OpenMP pool, made by this code before any filter: libgomp reads OMP_PLACES and binds its
 * threads (sched_setaffinity of each new thread) here, where binding is not a kernel's act. */
static int start_pool(int threads) {
    omp_set_num_threads(threads);
    int made = 1;
#pragma omp parallel
    {
#pragma omp single
        made = omp_get_num_threads();
    }
    return made;
}

struct layers { int dropped, loading, running, threads; };

/* Everything before the kernel's object is mapped, in this order: privileges (the process has
 * one thread, so capsets and the bounding set reach all of it), Landlock (inherited), the
 * pool, the address-space cap, then the loader's filter on every thread. */
static void contain(struct layers *l, int threads, unsigned long long memory_cap, int mode) {
    l->dropped = drop_privileges(mode);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a change of user clears it */
    preload_libraries();
    int statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    restrict_paths();
    l->threads = start_pool(threads);
    cap_memory(statm, memory_cap);
    prepare_running();
    l->loading = sandbox_for_loading();
}

/* The layers applied, as "name=value" words: seccomp filters (while loading, while running, on
 * every thread), the user the kernel runs as, whether root's privileges were dropped, Landlock
 * (its ABI, 0: none, with why), the threads made. */
static void report(const char *word, const struct layers *l, int mode) {
    const char *privileges = mode == DROP_NONE ? (geteuid() == 0 ? "root" : "user")
                             : l->dropped != 0 ? "root"
                             : mode == DROP_TO_NOBODY ? "nobody"
                                                      : "root-without-capabilities";
    char why[64] = "";
    if (!landlock_abi) snprintf(why, sizeof why, " landlock_error=%d", landlock_errno);
    reply("%s seccomp_load=%d seccomp=%d tsync=1 uid=%d dropped=%d privileges=%s no_new_privs=1 "
          "landlock=%d landlock_scopes=%s pool_threads=%d compute_filter_sealed=%d%s", word, l->loading == 0,
          l->running == 0, (int)getuid(), l->dropped == 0 && mode != DROP_NONE, privileges,
          landlock_abi, landlock_abi >= 6 ? "signal,abstract_unix_socket" : "none", l->threads,
          running_sealed, why);
}

/* The layers as a kernel would get them; then it waits (a read of the command pipe, allowed)
 * so that the worker can check every thread and that it still reaches this process's memory. */
static void do_probe(int threads, int mode) {
    struct layers l = {0};
    contain(&l, threads, 1ull << 30, mode);
    l.running = sandbox_for_running();
    report("isolation", &l, mode);
    char byte;
    (void)!read(CMD_FD, &byte, 1);
    _exit(0);
}

static void do_load(int threads, unsigned long long memory_cap, int require, int mode,
                    const char *path) {
    struct layers l = {0};
    char object[64];
    if (copy_object(path, object, sizeof object) < 0) {
        reply("error the kernel's object cannot be read: %s", strerror(errno));
        _exit(0);
    }
    contain(&l, threads, memory_cap, mode);
    if (require && l.dropped != 0) {
        reply("error root's privileges could not be given up: %s", strerror(errno));
        _exit(0);
    }
    if (l.loading != 0 && require) {
        reply("error the system call filter could not be installed on every thread: %s",
              strerror(errno));
        _exit(0);
    }
    void *handle = dlopen(object, RTLD_NOW | RTLD_LOCAL);
    if (!handle) { reply("error %s", dlerror()); _exit(0); }
    kernel = (kernel_fn)dlsym(handle, "kernel");
    if (!kernel) { reply("error the kernel defines no function named `kernel`"); _exit(0); }
    l.running = sandbox_for_running();
    if (l.running != 0 && require) {
        reply("error the system call filter could not be installed on every thread: %s",
              strerror(errno));
        _exit(0);
    }
    report("loaded", &l, mode);
    close(SETUP_FD);
}

/* ---- commands --------------------------------------------------------------------------- */
static int read_full(void *into, size_t bytes) {
    char *p = into;
    while (bytes) {
        ssize_t n = read(CMD_FD, p, bytes);
        if (n <= 0) return -1;
        p += n;
        bytes -= (size_t)n;
    }
    return 0;
}

static void call(kernel_fn fn, const uint64_t *a, uint32_t nargs) {
#define A(i) ((void *)(uintptr_t)a[i])
    switch (nargs) {
    case 1: fn(A(0)); break;
    case 2: fn(A(0), A(1)); break;
    case 3: fn(A(0), A(1), A(2)); break;
    case 4: fn(A(0), A(1), A(2), A(3)); break;
    case 5: fn(A(0), A(1), A(2), A(3), A(4)); break;
    case 6: fn(A(0), A(1), A(2), A(3), A(4), A(5)); break;
    case 7: fn(A(0), A(1), A(2), A(3), A(4), A(5), A(6)); break;
    case 8: fn(A(0), A(1), A(2), A(3), A(4), A(5), A(6), A(7)); break;
    case 9: fn(A(0), A(1), A(2), A(3), A(4), A(5), A(6), A(7), A(8)); break;
    case 10: fn(A(0), A(1), A(2), A(3), A(4), A(5), A(6), A(7), A(8), A(9)); break;
    case 11: fn(A(0), A(1), A(2), A(3), A(4), A(5), A(6), A(7), A(8), A(9), A(10)); break;
    case 12: fn(A(0), A(1), A(2), A(3), A(4), A(5), A(6), A(7), A(8), A(9), A(10), A(11)); break;
    default: {
        void *x[MAX_ARGS] = {0};
        for (uint32_t i = 0; i < nargs && i < MAX_ARGS; i++) x[i] = A(i);
        fn(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12],
           x[13], x[14], x[15], x[16], x[17], x[18], x[19], x[20], x[21], x[22], x[23], x[24],
           x[25], x[26], x[27], x[28], x[29], x[30], x[31]);
    }
    }
#undef A
}

static uint64_t addresses[MAX_CALLS * MAX_ARGS];

static void command(int kernel_loaded) {
    uint32_t head[4];
    if (read_full(head, sizeof head) != 0) _exit(0); /* the worker went away */
    uint32_t op = head[0], calls = head[1], nargs = head[2];
    if (calls > MAX_CALLS || nargs > MAX_ARGS) _exit(EXIT_PROTOCOL);
    if (read_full(addresses, (size_t)calls * nargs * 8) != 0) _exit(EXIT_PROTOCOL);
    if (op == OP_EXIT) { fflush(NULL); _exit(0); }
    if (op == OP_CALL && !kernel_loaded) _exit(EXIT_PROTOCOL);
    kernel_fn fn = op == OP_CALL ? kernel : (kernel_fn)noop;
    for (uint32_t c = 0; c < calls; c++) call(fn, addresses + (size_t)c * nargs, nargs);
    if (kernel_loaded) fflush(stdout);
    const unsigned char done = (unsigned char)head[3];
    if (write(DONE_FD, &done, 1) != 1) _exit(EXIT_PROTOCOL);
}

int main(int argc, char **argv) {
    if (argc != 4) { put("usage: accelopt-kernel-host SETUP_FD COMMAND_FD DONE_FD\n"); return 2; }
    SETUP_FD = atoi(argv[1]);
    CMD_FD = atoi(argv[2]);
    DONE_FD = atoi(argv[3]);
    page_size = sysconf(_SC_PAGESIZE);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the worker */
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    struct sigaction sa = {0};
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, NULL);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) { put("no_new_privs failed\n"); return 2; }
    setup_in = fdopen(SETUP_FD, "r");
    if (!setup_in) return 2;
    setvbuf(setup_in, NULL, _IONBF, 0); /* nothing read ahead past a line */
    char line[4352];
    while (fgets(line, sizeof line, setup_in)) {
        unsigned long long bytes, guard, fence, offset, cap;
        int threads, rounds, require, mode, at = 0;
        if (sscanf(line, "alloc %llu %llu %llu %llu", &bytes, &guard, &fence, &offset) == 4) {
            do_alloc((size_t)bytes, (size_t)guard, (size_t)fence, (size_t)offset);
        } else if (sscanf(line, "calibrate %d", &rounds) == 1) {
            for (int i = 0; i < rounds; i++) command(0);
            reply("ok");
        } else if (sscanf(line, "probe %d %d", &threads, &mode) == 2) {
            do_probe(threads, mode);
        } else if (sscanf(line, "load %d %llu %d %d %n", &threads, &cap, &require, &mode, &at) ==
                       4 && at > 0) {
            line[strcspn(line, "\n")] = 0;
            do_load(threads, cap, require, mode, line + at);
            for (;;) command(1);
        } else {
            return EXIT_PROTOCOL;
        }
    }
    return 0;
}
