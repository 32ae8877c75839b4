/* Memory bandwidth of one machine, all cores: the highest sustained DRAM bandwidth of several
 * access patterns (accelopt hardware micro-benchmark, after McCalpin's STREAM):
 *   triad     a[i] = b[i] + s * c[i]                 regular stores; 12 bytes per element (STREAM)
 *   triad_nt  the same with non-temporal stores      12 bytes (no write-allocate read of a)
 *   read      sum += b[i] + c[i] + d[i] + e[i]       read-only; 16 bytes per element
 *   stream5   a[i] = b + s*c + d*e (non-temporal)    four reads, one streamed write; 20 bytes
 * The roofline needs a ceiling no kernel can beat. Kernels that mostly read, or that stream their
 * stores, legitimately beat the plain triad (several read streams also keep more misses in
 * flight per core), so the ceiling is the best of these patterns.
 *
 * The arrays are first touched by the threads that later use them (static schedule both times),
 * so each page lives near its thread.
 *
 * usage: triad N REPEATS   prints one JSON line with the best bytes/s of each pattern.
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

enum { TRIAD, TRIAD_NT, READ, STREAM5, PATTERNS };

static float *alloc_floats(long n) {
    size_t bytes = ((size_t)n * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes);
    if (p == NULL) {
        fprintf(stderr, "triad: cannot allocate %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

static void triad(float *a, const float *b, const float *c, float s, long n) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

/* Non-temporal stores where the ISA has them; n is a multiple of 16 and a is 64-byte aligned. */
static void triad_nt(float *a, const float *b, const float *c, float s, long n) {
#if defined(__AVX512F__)
    const __m512 vs = _mm512_set1_ps(s);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += 16)
        _mm512_stream_ps(a + i, _mm512_fmadd_ps(vs, _mm512_load_ps(c + i), _mm512_load_ps(b + i)));
    _mm_sfence();
#elif defined(__AVX__)
    const __m256 vs = _mm256_set1_ps(s);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += 8)
        _mm256_stream_ps(a + i, _mm256_add_ps(_mm256_load_ps(b + i),
                                              _mm256_mul_ps(vs, _mm256_load_ps(c + i))));
    _mm_sfence();
#else
    triad(a, b, c, s, n);
#endif
}

static void stream5(float *a, const float *b, const float *c, const float *d, const float *e,
                    float s, long n) {
#if defined(__AVX512F__)
    const __m512 vs = _mm512_set1_ps(s);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += 16) {
        __m512 x = _mm512_fmadd_ps(vs, _mm512_load_ps(c + i), _mm512_load_ps(b + i));
        _mm512_stream_ps(a + i, _mm512_fmadd_ps(_mm512_load_ps(d + i), _mm512_load_ps(e + i), x));
    }
    _mm_sfence();
#else
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i] + d[i] * e[i];
#endif
}

/* `omp simd` lets the compiler vectorize the reduction (the sum only defeats dead-code
 * elimination; its rounding does not matter). */
static double read_only(const float *b, const float *c, const float *d, const float *e, long n) {
    float sum = 0.0f;
#pragma omp parallel for simd schedule(static) reduction(+ : sum)
    for (long i = 0; i < n; i++) sum += b[i] + c[i] + d[i] + e[i];
    return sum;
}

static void run(int p, float *a, float *b, float *c, float *d, float *e, float s, long n,
                double *check) {
    if (p == TRIAD) triad(a, b, c, s, n);
    if (p == TRIAD_NT) triad_nt(a, b, c, s, n);
    if (p == READ) *check += read_only(b, c, d, e, n);
    if (p == STREAM5) stream5(a, b, c, d, e, s, n);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 16L << 20;
    int repeats = argc > 2 ? atoi(argv[2]) : 5;
    float s = argc > 3 ? (float)atof(argv[3]) : 3.0f;
    n = n / 16 * 16;
    float *a = alloc_floats(n), *b = alloc_floats(n), *c = alloc_floats(n);
    float *d = alloc_floats(n), *e = alloc_floats(n);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        a[i] = 0.0f;
        b[i] = 1.0f;
        c[i] = 2.0f;
        d[i] = 0.5f;
        e[i] = 0.25f;
    }
    const double bytes[PATTERNS] = {12.0 * n, 12.0 * n, 16.0 * n, 20.0 * n};
    double best[PATTERNS] = {0.0}, check = 0.0;
    for (int r = 0; r < repeats; r++)
        for (int p = 0; p < PATTERNS; p++) {
            double t0 = omp_get_wtime();
            run(p, a, b, c, d, e, s, n, &check);
            double rate = bytes[p] / (omp_get_wtime() - t0);
            if (rate > best[p]) best[p] = rate;
        }
    double top = 0.0;
    for (int p = 0; p < PATTERNS; p++) top = best[p] > top ? best[p] : top;
    printf("{\"bandwidth\": %.6e, \"triad\": %.6e, \"triad_nt\": %.6e, \"read\": %.6e, "
           "\"stream5\": %.6e, \"threads\": %d, \"n\": %ld, \"check\": %.4f}\n",
           top, best[TRIAD], best[TRIAD_NT], best[READ], best[STREAM5], omp_get_max_threads(), n,
           (double)a[n / 2] + check * 1e-30);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    return 0;
}
