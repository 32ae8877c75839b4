/* Copies one environment variable (the test's canary) into the log, then computes correctly. It
 * reaches the environment through `environ`, which the static checks do not ban. */
#include <math.h>
#include <stddef.h>
#include <string.h>

int putchar(int c);
extern char **environ;

void kernel(const float *restrict x, float *restrict y) {
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "ACCELOPT_TEST_CANARY=", 21) == 0)
            for (const char *c = *e; *c; c++)
                putchar(*c);
    for (size_t i = 0; i < (size_t)M * N; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
}
