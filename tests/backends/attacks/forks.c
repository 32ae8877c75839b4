/* Forks a child that spins forever. */
#include <unistd.h>

void kernel(const float *x, float *y) {
    if (fork() == 0) for (;;) {}
    for (int i = 0; i < N; i++) y[i] = x[i];
}
