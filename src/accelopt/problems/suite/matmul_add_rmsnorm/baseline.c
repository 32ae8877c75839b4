/* matmul_add_rmsnorm baseline: per row, z plus the i-k-j matmul with w, then its RMS norm. */
#include <math.h>
#include <stdlib.h> /* size_t */

void kernel(const float *restrict x, const float *restrict w, const float *restrict z,
            const float *restrict g, float *restrict out) {
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        const float *xr = x + (size_t)i * K;
        const float *zr = z + (size_t)i * N;
        float *o = out + (size_t)i * N;
        for (int j = 0; j < N; j++)
            o[j] = zr[j];
        for (int k = 0; k < K; k++) {
            const float a = xr[k];
            const float *r = w + (size_t)k * N;
            for (int j = 0; j < N; j++)
                o[j] += a * r[j];
        }
        float ss = 0.0f;
        for (int j = 0; j < N; j++)
            ss += o[j] * o[j];
        const float inv = 1.0f / sqrtf(ss / (float)N + 1e-5f);
        for (int j = 0; j < N; j++)
            o[j] = o[j] * inv * g[j];
    }
}
