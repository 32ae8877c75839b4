/* transpose_matmul baseline: out = lhs_t^T @ rhs, i-k-j order; lhs_t is read down a column. */
#include <stdlib.h> /* size_t */

void kernel(const float *restrict lhs_t, const float *restrict rhs, float *restrict out) {
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        float *o = out + (size_t)i * N;
        for (int j = 0; j < N; j++)
            o[j] = 0.0f;
        for (int k = 0; k < K; k++) {
            const float a = lhs_t[(size_t)k * M + i];
            const float *r = rhs + (size_t)k * N;
            for (int j = 0; j < N; j++)
                o[j] += a * r[j];
        }
    }
}
