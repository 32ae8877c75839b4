/* rmsnorm_matmul baseline: per row, the inverse RMS of x, then the i-k-j matmul with w. */
#include <math.h>
#include <stdlib.h> /* size_t */

void kernel(const float *restrict x, const float *restrict w, float *restrict out) {
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        const float *xr = x + (size_t)i * K;
        float *o = out + (size_t)i * N;
        float ss = 0.0f;
        for (int k = 0; k < K; k++)
            ss += xr[k] * xr[k];
        const float inv = 1.0f / sqrtf(ss / (float)K);
        for (int j = 0; j < N; j++)
            o[j] = 0.0f;
        for (int k = 0; k < K; k++) {
            const float a = xr[k] * inv;
            const float *r = w + (size_t)k * N;
            for (int j = 0; j < N; j++)
                o[j] += a * r[j];
        }
    }
}
