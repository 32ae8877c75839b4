/* Asks for 8 GiB (four times the default 2 GiB cap) and touches every page. Under the cap malloc
 * returns NULL and the first write segfaults; without the cap it would really take the memory. */
#include <math.h>
#include <stdlib.h>

void kernel(const float *restrict x, float *restrict y) {
    const size_t n = (size_t)8 << 30;
    volatile char *p = malloc(n);
    for (size_t i = 0; i < n; i += 4096)
        p[i] = 1;
    for (size_t i = 0; i < (size_t)M * N; i++)
        y[i] = x[i] / (1.0f + expf(-x[i])) + (float)p[0] * 0.0f;
}
