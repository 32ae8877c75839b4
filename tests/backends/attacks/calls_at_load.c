/* At load time: one call that would weaken the sandbox still to come, chosen by CALL:
 * 1 prctl(PR_SET_DUMPABLE) (its /proc files open to peers), 2 a SIGSYS handler (forbidden calls
 * would fail instead of killing), 3 a seccomp filter of its own (to answer the next seccomp call
 * with success and keep the loader's allowances), 4 setresuid, 5 that filter installed the way the
 * kernel host installs its own (on every thread, TSYNC), which a check of the flags alone allows. */
#define _GNU_SOURCE
#include <signal.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* Answers every seccomp call with success, without installing anything; allows the rest. */
static struct sock_filter fake[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_seccomp, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

__attribute__((constructor)) static void at_load(void) {
    if (CALL == 1) prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    if (CALL == 2) signal(SIGSYS, SIG_IGN);
    if (CALL == 3) syscall(SYS_seccomp, 1, 0, (void *)0);
    if (CALL == 4) setresuid(0, 0, 0);
    struct sock_fprog prog = {sizeof fake / sizeof fake[0], fake};
    if (CALL == 5) syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
}

void kernel(const float *x, float *y) {
    for (int i = 0; i < N; i++) y[i] = x[i];
}
