/* Memory bandwidth of one machine, all cores: the STREAM triad  a[i] = b[i] + s * c[i]
 * (accelopt hardware micro-benchmark, after McCalpin's STREAM).
 *
 * The arrays are first touched by the threads that later use them (static schedule both times),
 * so each page lives near its thread. Bytes are counted as STREAM counts them: 3 arrays x 4 bytes
 * x n per pass (read b and c, write a); the write-allocate read of a is not counted.
 *
 * usage: triad N REPEATS   prints one JSON line with the best bytes/s of REPEATS passes.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static float *alloc_floats(long n) {
    size_t bytes = ((size_t)n * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes);
    if (p == NULL) {
        fprintf(stderr, "triad: cannot allocate %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 16L << 20;
    int repeats = argc > 2 ? atoi(argv[2]) : 5;
    float s = argc > 3 ? (float)atof(argv[3]) : 3.0f;
    float *a = alloc_floats(n), *b = alloc_floats(n), *c = alloc_floats(n);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        a[i] = 0.0f;
        b[i] = 1.0f;
        c[i] = 2.0f;
    }
    double best = 0.0;
    for (int r = 0; r < repeats; r++) {
        double t0 = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        double seconds = omp_get_wtime() - t0;
        double rate = 3.0 * sizeof(float) * (double)n / seconds; /* STREAM's byte count */
        if (rate > best) best = rate;
    }
    printf("{\"bandwidth\": %.6e, \"threads\": %d, \"n\": %ld, \"check\": %.4f}\n", best,
           omp_get_max_threads(), n, (double)a[n / 2]);
    free(a);
    free(b);
    free(c);
    return 0;
}
