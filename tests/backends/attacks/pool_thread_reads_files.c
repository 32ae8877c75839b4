/* On a pool thread: open and read each of PATHS (printf formats, given the worker's pid) with raw
 * system calls, and print what was read into the log (which the fixer LLM is shown). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <omp.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>

static void show(const char *format) {
    char path[256], buf[200] = {0};
    snprintf(path, sizeof path, format, (int)getppid());
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
    if (fd < 0) { printf("cannot open %s\n", path); return; }
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    for (long i = 0; i < n; i++) if (buf[i] == 0 || buf[i] == '\n') buf[i] = ' ';
    printf("read %s: %s\n", path, buf);
}

void kernel(const float *x, float *y) {
    static const char *const paths[] = {PATHS};
#pragma omp parallel num_threads(2)
    if (omp_get_thread_num() == 1)
        for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) show(paths[i]);
    for (int i = 0; i < N; i++) y[i] = x[i];
}
