/* matmul, i-k-j order: rows of rhs streamed into a row of out (what the baseline does). */
#include <stddef.h>
#include <string.h>

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        float *o = out + (size_t)i * N;
        memset(o, 0, sizeof(float) * N);
        for (int k = 0; k < K; k++) {
            const float a = lhs[(size_t)i * K + k];
            const float *r = rhs + (size_t)k * N;
            for (int j = 0; j < N; j++)
                o[j] += a * r[j];
        }
    }
}
