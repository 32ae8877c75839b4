/* matmul, i-j-k order: a dot product per output with a strided walk down rhs. */
#include <stddef.h>

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
#pragma omp parallel for
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += lhs[(size_t)i * K + k] * rhs[(size_t)k * N + j];
            out[(size_t)i * N + j] = acc;
        }
}
