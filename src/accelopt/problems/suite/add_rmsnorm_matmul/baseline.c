/* add_rmsnorm_matmul baseline: per row, x + z into a stack row, its RMS norm and gain, then the
   i-k-j matmul with w. */
#include <math.h>
#include <stdlib.h> /* size_t */

void kernel(const float *restrict x, const float *restrict z, const float *restrict g,
            const float *restrict w, float *restrict out) {
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        const float *xr = x + (size_t)i * K;
        const float *zr = z + (size_t)i * K;
        float *o = out + (size_t)i * N;
        float y[K];
        float ss = 0.0f;
        for (int k = 0; k < K; k++) {
            y[k] = xr[k] + zr[k];
            ss += y[k] * y[k];
        }
        const float inv = 1.0f / sqrtf(ss / (float)K + 1e-5f);
        for (int k = 0; k < K; k++)
            y[k] = y[k] * inv * g[k];
        for (int j = 0; j < N; j++)
            o[j] = 0.0f;
        for (int k = 0; k < K; k++) {
            const float a = y[k];
            const float *r = w + (size_t)k * N;
            for (int j = 0; j < N; j++)
                o[j] += a * r[j];
        }
    }
}
