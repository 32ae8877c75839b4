/* Correct silu that leaks 256 MiB (touched) at every call, until malloc fails. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void kernel(const float *restrict x, float *restrict y) {
    const size_t n = (size_t)M * N;
    char *leak = malloc((size_t)256 << 20);
    if (leak) memset(leak, 1, (size_t)256 << 20);
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}
