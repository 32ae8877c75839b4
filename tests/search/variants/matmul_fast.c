/* matmul, four output rows at a time: each row of rhs is loaded once for four FMAs. */
#include <stddef.h>
#include <string.h>

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
#pragma omp parallel for
    for (int i = 0; i < M; i += 4) {
        float *o0 = out + (size_t)i * N, *o1 = o0 + N, *o2 = o1 + N, *o3 = o2 + N;
        memset(o0, 0, sizeof(float) * 4 * N);
        for (int k = 0; k < K; k++) {
            const float a0 = lhs[(size_t)i * K + k], a1 = lhs[(size_t)(i + 1) * K + k];
            const float a2 = lhs[(size_t)(i + 2) * K + k], a3 = lhs[(size_t)(i + 3) * K + k];
            const float *r = rhs + (size_t)k * N;
            for (int j = 0; j < N; j++) {
                const float b = r[j];
                o0[j] += a0 * b;
                o1[j] += a1 * b;
                o2[j] += a2 * b;
                o3[j] += a3 * b;
            }
        }
    }
}
