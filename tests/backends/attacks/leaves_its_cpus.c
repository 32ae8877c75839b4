/* Widens its own CPU mask to every CPU, from the thread that calls it, then reports how many CPUs
 * it may run on: a kernel bound beside a neighbour for its timing would move off it. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>

void kernel(const float *x, float *y) {
    cpu_set_t every, now;
    CPU_ZERO(&every);
    for (int cpu = 0; cpu < 64; cpu++) CPU_SET(cpu, &every);
    sched_setaffinity(0, sizeof every, &every);
    CPU_ZERO(&now);
    sched_getaffinity(0, sizeof now, &now);
    printf("may run on %d CPUs\n", CPU_COUNT(&now));
    for (int i = 0; i < N; i++) y[i] = (float)CPU_COUNT(&now) + 0 * x[i];
}
