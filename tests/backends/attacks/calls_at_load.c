/* At load time: one call that would weaken the sandbox still to come, chosen by CALL:
 * 1 prctl(PR_SET_DUMPABLE) (its /proc files open to peers), 2 a SIGSYS handler (forbidden calls
 * would fail instead of killing), 3 a seccomp filter of its own (to answer the next seccomp call
 * with success and keep the loader's allowances), 4 setresuid. */
#define _GNU_SOURCE
#include <signal.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

__attribute__((constructor)) static void at_load(void) {
    if (CALL == 1) prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    if (CALL == 2) signal(SIGSYS, SIG_IGN);
    if (CALL == 3) syscall(SYS_seccomp, 1, 0, (void *)0);
    if (CALL == 4) setresuid(0, 0, 0);
}

void kernel(const float *x, float *y) {
    for (int i = 0; i < N; i++) y[i] = x[i];
}
