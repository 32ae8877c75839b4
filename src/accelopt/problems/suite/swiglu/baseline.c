/* swiglu baseline: per row, the gate and up rows (i-k-j), silu(gate) * up, then the down matmul. */
#include <math.h>
#include <stdlib.h>

void kernel(const float *restrict x, const float *restrict w_up, const float *restrict w_down,
            const float *restrict w_gate, float *restrict out) {
#pragma omp parallel
    {
        float *gate = malloc(2 * (size_t)N * sizeof(float));
        float *up = gate + N;
#pragma omp for
        for (int i = 0; i < M; i++) {
            const float *xr = x + (size_t)i * K;
            float *o = out + (size_t)i * K;
            for (int j = 0; j < N; j++) {
                gate[j] = 0.0f;
                up[j] = 0.0f;
            }
            for (int k = 0; k < K; k++) {
                const float a = xr[k];
                const float *g = w_gate + (size_t)k * N;
                const float *u = w_up + (size_t)k * N;
                for (int j = 0; j < N; j++) {
                    gate[j] += a * g[j];
                    up[j] += a * u[j];
                }
            }
            for (int j = 0; j < N; j++)
                gate[j] = gate[j] / (1.0f + expf(-gate[j])) * up[j];
            for (int k = 0; k < K; k++)
                o[k] = 0.0f;
            for (int j = 0; j < N; j++) {
                const float h = gate[j];
                const float *d = w_down + (size_t)j * K;
                for (int k = 0; k < K; k++)
                    o[k] += h * d[k];
            }
        }
        free(gate);
    }
}
