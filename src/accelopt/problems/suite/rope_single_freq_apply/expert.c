/* rope_single_freq_apply expert: x[D, T], cos and sin [D2, T] (D2 = D/2), row-major float32;
 * with x0 = x's first D2 rows and x1 its last D2 rows,
 *   out[0 : D2]  = x0 * cos - x1 * sin,
 *   out[D2 : D]  = x0 * sin + x1 * cos.
 *
 * Seen flat, row r of x0 is x[r*T ..], row r of x1 is x[D2*T + r*T ..] and row r of cos/sin is
 * cos[r*T ..]: the rows of each half follow one another, so the whole problem is ONE elementwise
 * loop over n = D2*T positions j with four read streams (x0 = x + j, x1 = x + D2*T + j, cos + j,
 * sin + j) and two write streams (out + j, out + D2*T + j): no row loop, no per-row edge, any T.
 *
 * Memory-bound (16 B read + 8 B written per position, 2 FLOP per 4 bytes), so the design only has
 * to keep DRAM busy. Three paths, picked by the compiler's target macros; all share the work split
 * in kernel(): the n positions are split into one contiguous span per thread (static; each span a
 * multiple of 64 positions past a common aligned start, so no two threads write one cache line);
 * the output is not assumed 64-byte aligned: a head (< 16 positions) aligns out for the streaming
 * stores; inputs are read with unaligned loads (x1 is aligned only when D2*T is a multiple of 16).
 *
 * AVX-512 (__AVX512F__): 4 zmm per stream per iteration (one 256-byte block), two FMAs per pair
 *    of outputs; when the arrays exceed the caches (USE_NT) both outputs are written with
 *    non-temporal stores (no read-for-ownership of out: 24 B of traffic per position instead of
 *    32), then sfence; the second output half is on the same alignment as the first only when
 *    D2*T is a multiple of 16 (compile-time), so streaming needs that too; masked head and tail.
 *    Software prefetch (PF_BYTES ahead on each read stream, 0 = none) is a tunable: on Zen 4 the
 *    hardware prefetchers already follow the six sequential streams, so the default is off. The
 *    streaming stores matter most: with regular stores the loop ran ~30 % slower.
 * AVX2 + FMA (__AVX2__ && __FMA__): the same with 8 ymm per stream per iteration (64 positions),
 *    32-byte aligned vmovntps under the same condition, then sfence; head and tail by vmaskmovps.
 * Portable (everything else, e.g. SSE-only x86 or aarch64): the formula per position in plain C,
 *    which the compiler vectorizes (#pragma omp simd) for SSE / NEON / SVE; ordinary stores.
 *
 * Tunables: NT_MIN_KIB (the streaming-store threshold, by default 16 L2s), PAR_MIN (the size below
 * which one thread does it all) and PF_BYTES (software prefetch distance, off by default).
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <omp.h>
#include <stddef.h>
#include <stdint.h>

#define HALF ((size_t)(D2) * (size_t)(T)) /* positions: elements of one output half */
/* The build passes this machine's per-core L2 size (sysfs); a cross build does not: 1 MiB. */
#ifndef ACCELOPT_L2_BYTES
#define ACCELOPT_L2_BYTES (1 << 20)
#endif
/* Stream the outputs past the caches once the arrays touched exceed NT_MIN_KIB KiB; 0: derive it
 * as 16 L2s (the order of a last-level cache: below that, the output may still be in cache for
 * whatever reads it next, and a regular store is better). 24 bytes are touched per position; both
 * output halves share one alignment only when HALF is a multiple of 16 (see the header). */
#ifndef NT_MIN_KIB
#define NT_MIN_KIB 0 /* tune: 0 2048 16384 131072 */
#endif
#define NT_MIN_BYTES (NT_MIN_KIB ? (size_t)NT_MIN_KIB << 10 : (size_t)16 * ACCELOPT_L2_BYTES)
#define USE_NT (HALF * 24 >= NT_MIN_BYTES && HALF % 16 == 0)
#ifndef PAR_MIN
#define PAR_MIN 4096 /* tune: 1024 4096 65536 */ /* positions: below, the fork costs more than it saves */
#endif
#define PARALLEL (HALF >= PAR_MIN)
/* Software prefetch distance in bytes ahead on each of the four read streams; 0: none. Measured
 * on Zen 4 the hardware prefetchers keep up with the six sequential streams: 256 bytes ahead was no
 * better, 1 KiB 8 % and 4 KiB 15 % slower (the prefetches compete with the demand misses), so the
 * default is off; where it helps, a few hundred bytes to a few KiB (the streams' lines well
 * inside L1d) is the range to try. */
#ifndef PF_BYTES
#define PF_BYTES 0 /* tune: 0 256 1024 4096 */
#endif

#if defined(__AVX512F__)

static inline void rot16(const float *x0, const float *x1, const float *c, const float *s,
                         __m512 *o0, __m512 *o1) {
    const __m512 a = _mm512_loadu_ps(x0), b = _mm512_loadu_ps(x1);
    const __m512 cv = _mm512_loadu_ps(c), sv = _mm512_loadu_ps(s);
    *o0 = _mm512_fmsub_ps(a, cv, _mm512_mul_ps(b, sv));
    *o1 = _mm512_fmadd_ps(a, sv, _mm512_mul_ps(b, cv));
}

static inline void run_masked(const float *restrict x, const float *restrict c,
                              const float *restrict s, float *restrict out, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i += 16) {
        const size_t left = hi - i;
        const __mmask16 k = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        const __m512 a = _mm512_maskz_loadu_ps(k, x + i), b = _mm512_maskz_loadu_ps(k, x + HALF + i);
        const __m512 cv = _mm512_maskz_loadu_ps(k, c + i), sv = _mm512_maskz_loadu_ps(k, s + i);
        _mm512_mask_storeu_ps(out + i, k, _mm512_fmsub_ps(a, cv, _mm512_mul_ps(b, sv)));
        _mm512_mask_storeu_ps(out + HALF + i, k, _mm512_fmadd_ps(a, sv, _mm512_mul_ps(b, cv)));
    }
}

static inline void prefetch_block(const float *x, const float *c, const float *s, size_t i) {
#if PF_BYTES > 0
    const size_t ahead = i + PF_BYTES / sizeof(float);
    for (int u = 0; u < 4; u++) { /* the four 64-byte lines of a 256-byte block */
        _mm_prefetch((const char *)(x + ahead + 16 * u), _MM_HINT_T0);
        _mm_prefetch((const char *)(x + HALF + ahead + 16 * u), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + ahead + 16 * u), _MM_HINT_T0);
        _mm_prefetch((const char *)(s + ahead + 16 * u), _MM_HINT_T0);
    }
#else
    (void)x, (void)c, (void)s, (void)i;
#endif
}

static inline void run_span(const float *restrict x, const float *restrict c,
                            const float *restrict s, float *restrict out, size_t lo, size_t hi) {
    size_t i = lo;
    for (; i + 64 <= hi; i += 64) {
        __m512 o0[4], o1[4];
        prefetch_block(x, c, s, i);
        for (int u = 0; u < 4; u++) {
            const size_t e = i + 16 * (size_t)u;
            rot16(x + e, x + HALF + e, c + e, s + e, &o0[u], &o1[u]);
        }
        for (int u = 0; u < 4; u++) {
            const size_t e = i + 16 * (size_t)u;
            if (USE_NT) {
                _mm512_stream_ps(out + e, o0[u]);
                _mm512_stream_ps(out + HALF + e, o1[u]);
            } else {
                _mm512_storeu_ps(out + e, o0[u]);
                _mm512_storeu_ps(out + HALF + e, o1[u]);
            }
        }
    }
    run_masked(x, c, s, out, i, hi);
    if (USE_NT) _mm_sfence();
}

#elif defined(__AVX2__) && defined(__FMA__)

static inline void run_masked(const float *restrict x, const float *restrict c,
                              const float *restrict s, float *restrict out, size_t lo, size_t hi) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (size_t i = lo; i < hi; i += 8) {
        const size_t left = hi - i;
        const __m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32(left >= 8 ? 8 : (int)left), lane);
        const __m256 a = _mm256_maskload_ps(x + i, k), b = _mm256_maskload_ps(x + HALF + i, k);
        const __m256 cv = _mm256_maskload_ps(c + i, k), sv = _mm256_maskload_ps(s + i, k);
        _mm256_maskstore_ps(out + i, k, _mm256_fmsub_ps(a, cv, _mm256_mul_ps(b, sv)));
        _mm256_maskstore_ps(out + HALF + i, k, _mm256_fmadd_ps(a, sv, _mm256_mul_ps(b, cv)));
    }
}

static inline void prefetch_block(const float *x, const float *c, const float *s, size_t i) {
#if PF_BYTES > 0
    const size_t ahead = i + PF_BYTES / sizeof(float);
    for (int u = 0; u < 4; u++) {
        _mm_prefetch((const char *)(x + ahead + 16 * u), _MM_HINT_T0);
        _mm_prefetch((const char *)(x + HALF + ahead + 16 * u), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + ahead + 16 * u), _MM_HINT_T0);
        _mm_prefetch((const char *)(s + ahead + 16 * u), _MM_HINT_T0);
    }
#else
    (void)x, (void)c, (void)s, (void)i;
#endif
}

static inline void run_span(const float *restrict x, const float *restrict c,
                            const float *restrict s, float *restrict out, size_t lo, size_t hi) {
    size_t i = lo;
    for (; i + 64 <= hi; i += 64) {
        __m256 o0[8], o1[8];
        prefetch_block(x, c, s, i);
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) {
            const size_t e = i + 8 * (size_t)u;
            const __m256 a = _mm256_loadu_ps(x + e), b = _mm256_loadu_ps(x + HALF + e);
            const __m256 cv = _mm256_loadu_ps(c + e), sv = _mm256_loadu_ps(s + e);
            o0[u] = _mm256_fmsub_ps(a, cv, _mm256_mul_ps(b, sv));
            o1[u] = _mm256_fmadd_ps(a, sv, _mm256_mul_ps(b, cv));
        }
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) {
            const size_t e = i + 8 * (size_t)u;
            if (USE_NT) {
                _mm256_stream_ps(out + e, o0[u]);
                _mm256_stream_ps(out + HALF + e, o1[u]);
            } else {
                _mm256_storeu_ps(out + e, o0[u]);
                _mm256_storeu_ps(out + HALF + e, o1[u]);
            }
        }
    }
    run_masked(x, c, s, out, i, hi);
    if (USE_NT) _mm_sfence();
}

#else /* portable: plain C that the compiler vectorizes, no intrinsics */

static inline void run_masked(const float *restrict x, const float *restrict c,
                              const float *restrict s, float *restrict out, size_t lo, size_t hi) {
    const float *restrict x1 = x + HALF;
    float *restrict o1 = out + HALF;
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        out[i] = x[i] * c[i] - x1[i] * s[i];
        o1[i] = x[i] * s[i] + x1[i] * c[i];
    }
}

static inline void run_span(const float *restrict x, const float *restrict c,
                            const float *restrict s, float *restrict out, size_t lo, size_t hi) {
    run_masked(x, c, s, out, lo, hi);
}

#endif

void kernel(const float *restrict x, const float *restrict cos, const float *restrict sin,
            float *restrict out) {
    /* positions before out + head is 64-byte aligned (out is at least float-aligned) */
    size_t head = (size_t)((64u - ((uintptr_t)out & 63u)) & 63u) / 4u;
    if (head > HALF) head = HALF;
#pragma omp parallel if (PARALLEL)
    {
        const size_t nt = (size_t)omp_get_num_threads();
        const size_t t = (size_t)omp_get_thread_num();
        if (t == 0 && head) run_masked(x, cos, sin, out, 0, head);
        /* spans in units of 64 positions (one 256-byte block) so every span start is aligned */
        const size_t blocks = (HALF - head + 63) / 64;
        size_t lo = head + (blocks * t / nt) * 64;
        size_t hi = head + (blocks * (t + 1) / nt) * 64;
        if (hi > HALF) hi = HALF;
        if (lo < hi) run_span(x, cos, sin, out, lo, hi);
    }
}
