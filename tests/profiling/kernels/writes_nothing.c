/* Returns at once: the poisoned (NaN) output stays as it was. */
void kernel(const float *restrict x, float *restrict y) {
    (void)x;
    (void)y;
}
