/* mamba baseline: the scan channel by channel, the state in a local array of S floats;
 * OpenMP over channels. */
#include <math.h>
#include <stdlib.h> /* size_t */

void kernel(const float *restrict delta, const float *restrict u, const float *restrict a,
            const float *restrict b, const float *restrict c, float *restrict out) {
#pragma omp parallel for
    for (int ch = 0; ch < C; ch++) {
        float h[S];
        for (int s = 0; s < S; s++)
            h[s] = 0.0f;
        const float *ar = a + (size_t)ch * S;
        for (int i = 0; i < M; i++) {
            const float d = delta[(size_t)ch * M + i];
            const float du = d * u[(size_t)ch * M + i];
            float y = 0.0f;
            for (int s = 0; s < S; s++) {
                h[s] = expf(d * ar[s]) * h[s] + du * b[(size_t)s * M + i];
                y += c[(size_t)s * M + i] * h[s];
            }
            out[(size_t)ch * M + i] = y;
        }
    }
}
