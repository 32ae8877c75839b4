/* Computes only the first half of the rows. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, float *restrict y) {
#pragma omp parallel for
    for (int i = 0; i < M / 2; i++)
        for (int j = 0; j < N; j++) {
            const float v = x[(size_t)i * N + j];
            y[(size_t)i * N + j] = v / (1.0f + expf(-v));
        }
}
