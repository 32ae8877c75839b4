/* A constructor spelled through macros, so that no attribute appears in the text: it would run
 * when the object is loaded, before any check of a call. */
#include <math.h>
#include <stddef.h>
#define ATTR __attribute__
#define WHEN constructor

static void early(void) ATTR((WHEN));
static void early(void) {}

void kernel(const float *restrict x, float *restrict y) {
    const size_t n = (size_t)M * N;
    for (size_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}
