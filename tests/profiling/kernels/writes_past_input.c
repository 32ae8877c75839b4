/* Computes the right answer, then casts away const and writes one float 8 floats past the end of
   its input (the input itself is untouched). */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, float *restrict y) {
    for (size_t i = 0; i < (size_t)M * N; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
    ((float *)x)[(size_t)M * N + 7] = 1.0f;
}
