/* gqa_full baseline: one query row at a time; the N scores in a buffer, a max pass, exp and sum,
 * then the probability-weighted sum of v rows. OpenMP over (batch, query head, query row). */
#include <math.h>
#include <stdlib.h> /* size_t, malloc */

void kernel(const float *restrict q, const float *restrict k, const float *restrict v,
            float *restrict out) {
    const int group = QH / KH;
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel
    {
        float *scores = malloc(sizeof(float) * N);
#pragma omp for collapse(3)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < QH; h++) {
                for (int i = 0; i < N; i++) {
                    const int kvh = h / group;
                    const float *qr = q + (((size_t)b * N + i) * QH + h) * D;
                    float mx = -INFINITY;
                    for (int j = 0; j < N; j++) {
                        const float *kr = k + (((size_t)b * N + j) * KH + kvh) * D;
                        float s = 0.0f;
                        for (int d = 0; d < D; d++)
                            s += qr[d] * kr[d];
                        s *= scale;
                        scores[j] = s;
                        mx = fmaxf(mx, s);
                    }
                    float sum = 0.0f;
                    for (int j = 0; j < N; j++) {
                        scores[j] = expf(scores[j] - mx);
                        sum += scores[j];
                    }
                    const float inv = 1.0f / sum;
                    float *o = out + (((size_t)b * QH + h) * N + i) * D;
                    for (int d = 0; d < D; d++)
                        o[d] = 0.0f;
                    for (int j = 0; j < N; j++) {
                        const float p = scores[j] * inv;
                        const float *vr = v + (((size_t)b * N + j) * KH + kvh) * D;
                        for (int d = 0; d < D; d++)
                            o[d] += p * vr[d];
                    }
                }
            }
        }
        free(scores);
    }
}
