void kernel(const float *x, const float *a, const float *b, float *y) {
#pragma omp parallel for
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            y[i * N + j] = x[i * N + j] + b[j];
}
