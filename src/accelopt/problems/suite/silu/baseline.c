/* silu baseline: y = x / (1 + exp(-x)), one OpenMP thread per block of rows. */
#include <math.h>
#include <stdlib.h> /* size_t */

void kernel(const float *restrict x, float *restrict y) {
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        const float *xr = x + (size_t)i * N;
        float *yr = y + (size_t)i * N;
        for (int j = 0; j < N; j++) {
            const float v = xr[j];
            yr[j] = v / (1.0f + expf(-v));
        }
    }
}
