/* Ends the worker process from inside the call. */
#include <stdlib.h>

void kernel(const float *restrict x, float *restrict y) {
    y[0] = x[0];
    exit(3);
}
