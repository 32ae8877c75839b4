/* Correct silu that also writes the float just before its output. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, float *restrict y) {
    const size_t n = (size_t)M * N;
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
    y[-1] = 0.0f;
}
