/* Correct silu that prints what stands for a leaked API key (the test puts the same value in an
 * environment variable named like a key; the log must never show it). */
#include <math.h>
#include <stddef.h>

static int told;

void kernel(const float *restrict x, float *restrict y) {
    const size_t n = (size_t)M * N;
    if (!told++) __builtin_printf("found key: sk-accelopt-test-9f8e7d6c5b4a\n");
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}
