/* Computes the right answer, and reads one float 1 MiB past the end of its input. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, float *restrict y) {
    for (size_t i = 0; i < (size_t)M * N; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
    const volatile float *far = x + (size_t)M * N + ((size_t)1 << 18);
    (void)*far;
}
