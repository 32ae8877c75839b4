/* Builds, but defines no function named `kernel`. */
void silu_kernel(const float *restrict x, float *restrict y) {
    y[0] = x[0];
}
