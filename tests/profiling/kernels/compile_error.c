#include <math.h>

void kernel(const float *restrict x, float *restrict y) {
    y[0] = x[0] * not_declared_anywhere;
}
