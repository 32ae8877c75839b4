/* Writes through a NULL pointer: the worker dies from SIGSEGV. */
#include <stddef.h>

void kernel(const float *restrict x, float *restrict y) {
    volatile float *nowhere = NULL;
    *nowhere = x[0];
    y[0] = x[0];
}
