#include <unistd.h>

void kernel(const float *restrict x, float *restrict y) {
    y[0] = x[0] + (float)getpid();
}
