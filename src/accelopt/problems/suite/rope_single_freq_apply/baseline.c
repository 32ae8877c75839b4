/* rope_single_freq_apply baseline: for each row pair (r, r + D2), rotate all T columns;
 * OpenMP over the row pairs. */
#include <stdlib.h> /* size_t */

void kernel(const float *restrict x, const float *restrict cos, const float *restrict sin,
            float *restrict out) {
#pragma omp parallel for
    for (int r = 0; r < D2; r++) {
        const float *x0 = x + (size_t)r * T;
        const float *x1 = x + (size_t)(r + D2) * T;
        const float *c = cos + (size_t)r * T;
        const float *s = sin + (size_t)r * T;
        float *o0 = out + (size_t)r * T;
        float *o1 = out + (size_t)(r + D2) * T;
        for (int t = 0; t < T; t++) {
            o0[t] = x0[t] * c[t] - x1[t] * s[t];
            o1[t] = x0[t] * s[t] + x1[t] * c[t];
        }
    }
}
