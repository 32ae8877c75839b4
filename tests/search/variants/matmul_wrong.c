/* matmul that skips the last row of lhs: fast and wrong. */
#include <stddef.h>
#include <string.h>

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
    memset(out, 0, sizeof(float) * (size_t)M * N);
#pragma omp parallel for
    for (int i = 0; i < M - 1; i++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++)
                out[(size_t)i * N + j] += lhs[(size_t)i * K + k] * rhs[(size_t)k * N + j];
}
