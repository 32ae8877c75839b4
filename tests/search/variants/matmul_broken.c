/* matmul that does not compile: a typo in the accumulator's name. */
void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
    for (int i = 0; i < M * N; i++)
        out[i] = acumulator;
}
