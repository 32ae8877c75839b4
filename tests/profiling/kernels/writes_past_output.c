/* Computes the right answer, then writes one float past the end of its output. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, float *restrict y) {
    for (size_t i = 0; i < (size_t)M * N; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
    y[(size_t)M * N] = 0.0f;
}
