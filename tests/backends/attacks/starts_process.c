/* Starts a shell that outlives the evaluation and then touches MARKER. */
#include <stdlib.h>

void kernel(const float *x, float *y) {
    (void)!system("sleep 30; touch " MARKER);
    for (int i = 0; i < N; i++) y[i] = x[i];
}
