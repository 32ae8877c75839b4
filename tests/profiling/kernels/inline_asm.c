#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, float *restrict y) {
    __asm__ volatile("nop");
    for (size_t i = 0; i < (size_t)M * N; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
}
