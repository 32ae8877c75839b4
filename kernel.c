/* adamw baseline: the t = 1 update element by element, one OpenMP thread per block of rows. */
#include <math.h>
#include <stdlib.h> /* size_t */

void kernel(const float *restrict theta, const float *restrict g, const float *restrict m,
            const float *restrict v, float *restrict out) {
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        const size_t row = (size_t)i * N;
        for (int j = 0; j < N; j++) {
            const size_t e = row + j;
            const float gr = g[e];
            const float m1 = 0.9f * m[e] + 0.1f * gr;
            const float v1 = 0.999f * v[e] + 0.001f * gr * gr;
            out[e] = theta[e] * (1.0f - 1e-5f) - 0.01f * m1 / (sqrtf(1000.0f * v1) + 1e-8f);
        }
    }
}
