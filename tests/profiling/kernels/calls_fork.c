#include <math.h>

int fork(void);

void kernel(const float *restrict x, float *restrict y) {
    fork();
    y[0] = x[0];
}
