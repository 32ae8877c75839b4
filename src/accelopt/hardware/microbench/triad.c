/* Memory bandwidth of one machine, all cores: the highest sustained DRAM bandwidth over the
 * read:write mixes a kernel can have (accelopt hardware micro-benchmark, after McCalpin's STREAM).
 * Bytes are counted as STREAM and the roofline's cost models count them: each array read or
 * written once, the write-allocate read of a regular store not counted.
 *
 *   read      sum += b + c + d + e           read-only                       16 bytes / element
 *   copy      memcpy(a, b)                   1:1, the C library's copy        8
 *   scale     a = s * b                      1:1, regular stores              8
 *   scale_nt  the same, non-temporal stores  1:1                              8
 *   triad     a = b + s * c                  2:1, regular stores (STREAM)    12
 *   triad_nt  the same, non-temporal stores  2:1                             12
 *   sum3      a = b + s * c + d              3:1, regular stores             16
 *   sum3_nt   the same, non-temporal stores  3:1                             16
 *   sum4      a = b + s * c + d * e          4:1, regular stores             20
 *   sum4_nt   the same, non-temporal stores  4:1                             20
 *
 * The roofline needs a ceiling no honest kernel beats: a kernel that mostly reads, or streams its
 * stores, legitimately beats the plain triad (several read streams also keep more misses in flight
 * per core), so the ceiling is the best of these patterns. Non-temporal stores use x86 intrinsics
 * (AVX-512, AVX or SSE); elsewhere (aarch64) the _nt patterns are plain C loops, as a kernel
 * written in portable C would be.
 *
 * The patterns take turns within each repeat, so a disturbance hits them alike; the arrays are
 * first touched by the threads that later use them (static schedule both times), so each page
 * lives near its thread.
 *
 * usage: triad N REPEATS   prints one JSON line: the best bytes/s, the winning pattern, and per
 * pattern the best, median and worst bytes/s of its repeats.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <omp.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { READ, COPY, SCALE, SCALE_NT, TRIAD, TRIAD_NT, SUM3, SUM3_NT, SUM4, SUM4_NT, PATTERNS };

static const char *const NAMES[PATTERNS] = {"read",     "copy",  "scale",   "scale_nt", "triad",
                                            "triad_nt", "sum3",  "sum3_nt", "sum4",     "sum4_nt"};
/* Arrays read and written per element, as the cost models count them. */
static const int READS[PATTERNS] = {4, 1, 1, 1, 2, 2, 3, 3, 4, 4};
static const int WRITES[PATTERNS] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1};

#define MAX_REPEATS 64

#include "vectors.h"

/* 2 MiB aligned and, on Linux, backed by transparent huge pages where the kernel allows them
 * (THP "madvise" mode needs the hint): the harness's buffers come from NumPy, which asks for huge
 * pages too, and 4 KiB pages alone cost a memory-bound kernel ~15 % in TLB misses here. */
#define HUGE_BYTES ((size_t)2 << 20)
static float *alloc_floats(long n) {
    size_t bytes = ((size_t)n * sizeof(float) + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES;
    float *p = aligned_alloc(HUGE_BYTES, bytes);
    if (p == NULL) {
        fprintf(stderr, "triad: cannot allocate %zu bytes\n", bytes);
        exit(1);
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes, MADV_HUGEPAGE); /* a hint: without THP it fails and nothing changes */
#endif
    return p;
}

/* `omp simd` lets the compiler vectorize the reduction (the sum only defeats dead-code
 * elimination; its rounding does not matter). */
static double read_only(const float *b, const float *c, const float *d, const float *e, long n) {
    float sum = 0.0f;
#pragma omp parallel for simd schedule(static) reduction(+ : sum)
    for (long i = 0; i < n; i++) sum += b[i] + c[i] + d[i] + e[i];
    return sum;
}

/* Each thread copies its own contiguous share with the C library's memcpy. */
static void copy(float *a, const float *b, long n) {
#pragma omp parallel
    {
        long t = omp_get_thread_num(), nt = omp_get_num_threads();
        long lo = n * t / nt / 16 * 16, hi = t == nt - 1 ? n : n * (t + 1) / nt / 16 * 16;
        memcpy(a + lo, b + lo, (size_t)(hi - lo) * sizeof(float));
    }
}

static void scale(float *a, const float *b, float s, long n) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = s * b[i];
}

static void triad(float *a, const float *b, const float *c, float s, long n) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

static void sum3(float *a, const float *b, const float *c, const float *d, float s, long n) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i] + d[i];
}

static void sum4(float *a, const float *b, const float *c, const float *d, const float *e,
                 float s, long n) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i] + d[i] * e[i];
}

/* Non-temporal stores where the ISA has them: n is a multiple of 16 and every array is 64-byte
 * aligned, so each thread's share starts on a vector boundary. */
#if defined(__x86_64__)
static void scale_nt(float *a, const float *b, float s, long n) {
    const vf vs = VSET1(s);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += W) VSTREAM(a + i, VMUL(vs, VLOAD(b + i)));
    _mm_sfence();
}

static void triad_nt(float *a, const float *b, const float *c, float s, long n) {
    const vf vs = VSET1(s);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += W) VSTREAM(a + i, VADD(VLOAD(b + i), VMUL(vs, VLOAD(c + i))));
    _mm_sfence();
}

static void sum3_nt(float *a, const float *b, const float *c, const float *d, float s, long n) {
    const vf vs = VSET1(s);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += W) {
        vf x = VADD(VLOAD(b + i), VMUL(vs, VLOAD(c + i)));
        VSTREAM(a + i, VADD(x, VLOAD(d + i)));
    }
    _mm_sfence();
}

static void sum4_nt(float *a, const float *b, const float *c, const float *d, const float *e,
                    float s, long n) {
    const vf vs = VSET1(s);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += W) {
        vf x = VADD(VLOAD(b + i), VMUL(vs, VLOAD(c + i)));
        VSTREAM(a + i, VADD(x, VMUL(VLOAD(d + i), VLOAD(e + i))));
    }
    _mm_sfence();
}
#else
static void scale_nt(float *a, const float *b, float s, long n) { scale(a, b, s, n); }

static void triad_nt(float *a, const float *b, const float *c, float s, long n) {
    triad(a, b, c, s, n);
}

static void sum3_nt(float *a, const float *b, const float *c, const float *d, float s, long n) {
    sum3(a, b, c, d, s, n);
}

static void sum4_nt(float *a, const float *b, const float *c, const float *d, const float *e,
                    float s, long n) {
    sum4(a, b, c, d, e, s, n);
}
#endif

static void run(int p, float *a, float *b, float *c, float *d, float *e, float s, long n,
                double *check) {
    switch (p) {
    case READ: *check += read_only(b, c, d, e, n); break;
    case COPY: copy(a, b, n); break;
    case SCALE: scale(a, b, s, n); break;
    case SCALE_NT: scale_nt(a, b, s, n); break;
    case TRIAD: triad(a, b, c, s, n); break;
    case TRIAD_NT: triad_nt(a, b, c, s, n); break;
    case SUM3: sum3(a, b, c, d, s, n); break;
    case SUM3_NT: sum3_nt(a, b, c, d, s, n); break;
    case SUM4: sum4(a, b, c, d, e, s, n); break;
    default: sum4_nt(a, b, c, d, e, s, n); break;
    }
}

static int by_rate(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a < b) - (a > b); /* descending */
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 16L << 20;
    int repeats = argc > 2 ? atoi(argv[2]) : 5;
    float s = argc > 3 ? (float)atof(argv[3]) : 3.0f;
    n = n / 16 * 16;
    if (n < 16 || repeats < 1 || repeats > MAX_REPEATS) {
        fprintf(stderr, "triad: need N >= 16 and 1 <= REPEATS <= %d\n", MAX_REPEATS);
        return 2;
    }
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
    static double rates[PATTERNS][MAX_REPEATS];
    double check = 0.0;
    for (int r = 0; r < repeats; r++)
        for (int p = 0; p < PATTERNS; p++) {
            double bytes = 4.0 * n * (READS[p] + WRITES[p]);
            double t0 = omp_get_wtime();
            run(p, a, b, c, d, e, s, n, &check);
            rates[p][r] = bytes / (omp_get_wtime() - t0);
        }
    int top = 0;
    for (int p = 0; p < PATTERNS; p++) {
        qsort(rates[p], (size_t)repeats, sizeof(double), by_rate);
        if (rates[p][0] > rates[top][0]) top = p;
    }
    printf("{\"bandwidth\": %.6e, \"pattern\": \"%s\", \"patterns\": {", rates[top][0], NAMES[top]);
    for (int p = 0; p < PATTERNS; p++)
        printf("%s\"%s\": {\"best\": %.6e, \"median\": %.6e, \"worst\": %.6e, \"reads\": %d, "
               "\"writes\": %d}",
               p ? ", " : "", NAMES[p], rates[p][0], rates[p][repeats / 2], rates[p][repeats - 1],
               READS[p], WRITES[p]);
    printf("}, \"repeats\": %d, \"threads\": %d, \"n\": %ld, \"check\": %.4f}\n", repeats,
           omp_get_max_threads(), n, (double)a[n / 2] + check * 1e-30);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    return 0;
}
