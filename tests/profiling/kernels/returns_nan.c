/* Right everywhere except for the negative inputs below -3, where it writes NaN. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, float *restrict y) {
#pragma omp parallel for
    for (size_t i = 0; i < (size_t)M * N; i++) {
        const float v = x[i];
        y[i] = v < -3.0f ? NAN : v / (1.0f + expf(-v));
    }
}
