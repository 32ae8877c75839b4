/* Floating-point throughput of one machine, all cores (accelopt hardware micro-benchmark).
 *
 * Each OpenMP thread runs NACC independent chains  acc = acc * m + a  on the widest vectors the
 * target has. Built twice from this one source:
 *   -ffp-contract=fast  each update is one fused multiply-add (the "matmul" ceiling);
 *   -ffp-contract=off   each update is a multiply then an add (the "vector" ceiling).
 * Either way an update is 2 FLOP per lane (FMA: 2 FLOP; mul + add: 1 FLOP each).
 * NACC covers FMA latency x issue width (4 cycles x 2 pipes = 8 on most x86) and, without FMA,
 * most of the multiply + add latency (6 cycles x 2 pipes).
 * m and a come from argv so nothing can be folded at compile time; |acc| stays near a / (1 - m).
 *
 * usage: flops ITERATIONS REPEATS   prints one JSON line with the best FLOP/s of REPEATS runs, and
 * the median and the worst (how much the repeats varied: a busy machine varies).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__AVX512F__)
#define VBYTES 64 /* 32 zmm registers: 16 chains + 2 constants */
#define NACC 16
#elif defined(__AVX__)
#define VBYTES 32 /* 16 ymm registers: 12 chains + 2 constants */
#define NACC 12
#elif defined(__aarch64__)
#define VBYTES 16 /* 32 NEON registers: 24 chains cover 4-cycle FMAs on up to 4 pipes + 2 */
#define NACC 24
#else
#define VBYTES 16 /* SSE, 16 xmm registers: 12 chains; without FMA a chain's multiply then add */
#define NACC 12   /* is twice the latency, so 8 chains would measure the latency, not the pipes */
#endif
#define LANES (VBYTES / 4)
#define MAX_REPEATS 64

typedef float vec __attribute__((vector_size(VBYTES)));

static float run_chains(long iters, float m_s, float a_s, float seed) {
    vec zero = {0};
    vec m = zero + m_s;
    vec a = zero + a_s;
    vec acc[NACC];
    for (int j = 0; j < NACC; j++) acc[j] = zero + (seed + 0.001f * (float)j);
    for (long i = 0; i < iters; i++) {
        for (int j = 0; j < NACC; j++) acc[j] = acc[j] * m + a;
    }
    float sum = 0.0f;
    for (int j = 0; j < NACC; j++) {
        for (int l = 0; l < LANES; l++) sum += acc[j][l];
    }
    return sum;
}

static int by_rate(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a < b) - (a > b); /* descending */
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 20000000L;
    int repeats = argc > 2 ? atoi(argv[2]) : 5;
    float m_s = argc > 3 ? (float)atof(argv[3]) : 0.9999999f;
    float a_s = argc > 4 ? (float)atof(argv[4]) : 1e-7f;
    if (repeats < 1 || repeats > MAX_REPEATS) {
        fprintf(stderr, "flops: need 1 <= REPEATS <= %d\n", MAX_REPEATS);
        return 2;
    }
    int threads = omp_get_max_threads();
    double rates[MAX_REPEATS];
    float check = 0.0f;
    for (int r = 0; r < repeats; r++) {
        float sink = 0.0f;
        double t0 = omp_get_wtime();
#pragma omp parallel reduction(+ : sink)
        sink += run_chains(iters, m_s, a_s, 1.0f + 0.01f * (float)omp_get_thread_num());
        double seconds = omp_get_wtime() - t0;
        /* FLOP = threads x iterations x chains x lanes x 2 (see the header). */
        rates[r] = (double)threads * (double)iters * NACC * LANES * 2.0 / seconds;
        check += sink;
    }
    qsort(rates, (size_t)repeats, sizeof(double), by_rate);
    printf("{\"rate\": %.6e, \"median\": %.6e, \"worst\": %.6e, \"repeats\": %d, "
           "\"threads\": %d, \"chains\": %d, \"vector_bits\": %d, \"check\": %.4f}\n",
           rates[0], rates[repeats / 2], rates[repeats - 1], repeats, threads, NACC, VBYTES * 8,
           (double)check);
    return 0;
}
