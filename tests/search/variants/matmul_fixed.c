/* matmul, i-k-j order with the output row cleared by a loop: the fixer's repair. */
#include <stddef.h>

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        float *o = out + (size_t)i * N;
        for (int j = 0; j < N; j++)
            o[j] = 0.0f;
        for (int k = 0; k < K; k++) {
            const float a = lhs[(size_t)i * K + k];
            const float *r = rhs + (size_t)k * N;
            for (int j = 0; j < N; j++)
                o[j] += a * r[j];
        }
    }
}
