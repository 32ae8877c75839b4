/* lora baseline: per row, the rank-R row x @ a in a stack array, then out = x @ w + (x @ a) @ b,
   both matmuls in i-k-j order. */
#include <stdlib.h> /* size_t */

void kernel(const float *restrict x, const float *restrict w, const float *restrict a,
            const float *restrict b, float *restrict out) {
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        const float *xr = x + (size_t)i * K;
        float *o = out + (size_t)i * N;
        float xa[R];
        for (int r = 0; r < R; r++)
            xa[r] = 0.0f;
        for (int k = 0; k < K; k++) {
            const float v = xr[k];
            const float *ar = a + (size_t)k * R;
            for (int r = 0; r < R; r++)
                xa[r] += v * ar[r];
        }
        for (int j = 0; j < N; j++)
            o[j] = 0.0f;
        for (int k = 0; k < K; k++) {
            const float v = xr[k];
            const float *wr = w + (size_t)k * N;
            for (int j = 0; j < N; j++)
                o[j] += v * wr[j];
        }
        for (int r = 0; r < R; r++) {
            const float v = xa[r];
            const float *br = b + (size_t)r * N;
            for (int j = 0; j < N; j++)
                o[j] += v * br[j];
        }
    }
}
