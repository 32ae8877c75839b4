/* Honest: SiLU over THREADS OpenMP threads (more than the pool: threads made after the filters). */
#include <math.h>

void kernel(const float *x, float *y) {
#pragma omp parallel for num_threads(THREADS)
    for (int i = 0; i < N; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}
