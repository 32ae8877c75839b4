/* Three pointers where silu's contract has two (x, then y). */
void kernel(const float *restrict x, float *restrict y, float *restrict z) {
    y[0] = x[0];
    z[0] = x[0];
}
