/* Right and in bounds for its first five calls (the correctness seeds), then writes one float
   past the end of its output on every later call: only the timed calls' guards see it. */
#include <math.h>
#include <stddef.h>

static int calls;

void kernel(const float *restrict x, float *restrict y) {
    for (size_t i = 0; i < (size_t)M * N; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
    if (++calls > 5)
        y[(size_t)M * N] = 0.0f;
}
