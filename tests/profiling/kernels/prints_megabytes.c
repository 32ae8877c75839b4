/* Prints 4 MiB on its first call, then computes correctly. <stdio.h> is not allowed, so it declares
 * puts and putchar itself. puts writes the bulk in 64 KiB lines: with PYTHONUNBUFFERED set (as in
 * many CI images) the worker's C stdout is unbuffered, and 4 Mi putchar calls would be 4 Mi
 * write(2) calls. */
#include <math.h>
#include <stddef.h>

int putchar(int c);
int puts(const char *s);

#define LINE (64 << 10)

static int printed;
static char line[LINE + 1];

void kernel(const float *restrict x, float *restrict y) {
    if (!printed) {
        for (int i = 0; i < LINE; i++)
            line[i] = (char)('a' + i % 26);
        for (int i = 0; i < 64; i++)
            puts(line);
        for (int i = 0; i < 1000; i++)
            putchar('z');
        printed = 1;
    }
#pragma omp parallel for
    for (size_t i = 0; i < (size_t)M * N; i++) {
        const float v = x[i];
        y[i] = v / (1.0f + expf(-v));
    }
}
