/* Computes the right answer, and reads one float 16 KiB past the end of its input: beyond the
   4 KiB guard region, but near enough to land in other heap memory when nothing fences it. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, float *restrict y) {
    for (size_t i = 0; i < (size_t)M * N; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
    const volatile float *near = x + (size_t)M * N + 4096;
    (void)*near;
}
