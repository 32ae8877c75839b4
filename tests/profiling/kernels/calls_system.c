#include <stdlib.h>

void kernel(const float *restrict x, float *restrict y) {
    system("true");
    y[0] = x[0];
}
