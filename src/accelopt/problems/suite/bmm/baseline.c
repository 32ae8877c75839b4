/* bmm baseline: per batch, the i-k-j matmul; OpenMP over (batch, row) pairs. */
#include <stdlib.h> /* size_t */

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < M; i++) {
            const float *l = lhs + ((size_t)b * M + i) * K;
            const float *r0 = rhs + (size_t)b * K * N;
            float *o = out + ((size_t)b * M + i) * N;
            for (int j = 0; j < N; j++)
                o[j] = 0.0f;
            for (int k = 0; k < K; k++) {
                const float a = l[k];
                const float *r = r0 + (size_t)k * N;
                for (int j = 0; j < N; j++)
                    o[j] += a * r[j];
            }
        }
    }
}
