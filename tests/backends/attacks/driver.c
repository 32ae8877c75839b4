/* Runs a kernel with no sandbox: what its code does when nothing stops it. A pipe stands for
 * the kernel host's command pipe (a descriptor a SIGIO attack arms); a byte is written to it after
 * the call, as the worker writes its next command. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
static float x[1024], y[1024];
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    void (*kernel)(const float *, float *) = (void (*)(const float *, float *))dlsym(h, "kernel");
    int p[2];
    if (pipe(p) != 0) return 3;
    kernel(x, y);
    (void)!write(p[1], "x", 1);
    fflush(stdout);
    usleep(200000);
    return 0;
}
