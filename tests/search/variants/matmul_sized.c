/* matmul, i-k-j order, tuned to one shape: it computes at most 70 rows, so it is correct where
   M <= 70 (the small workload) and wrong where M is larger (tiny: M = 72). */
#include <stddef.h>
#include <string.h>

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
    const int rows = M < 70 ? M : 70;
    memset(out, 0, sizeof(float) * (size_t)M * N);
#pragma omp parallel for
    for (int i = 0; i < rows; i++) {
        float *o = out + (size_t)i * N;
        for (int k = 0; k < K; k++) {
            const float a = lhs[(size_t)i * K + k];
            const float *r = rhs + (size_t)k * N;
            for (int j = 0; j < N; j++)
                o[j] += a * r[j];
        }
    }
}
