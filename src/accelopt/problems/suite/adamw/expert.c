/* adamw expert: one AdamW step at t = 1, elementwise over [M, N]:
 *   m1 = 0.9 m + 0.1 g,  v1 = 0.999 v + 0.001 g^2,
 *   out = theta (1 - 1e-5) - 0.01 m1 / (sqrt(1000 v1) + 1e-8).
 *
 * Memory-bound (16 B read + 4 B written per element, ~1 FLOP per 3 bytes), so the design only has
 * to keep DRAM busy. Three paths, picked by the compiler's target macros; all share the work split
 * in kernel(): the flat M*N range is split into one contiguous span per thread (static, both
 * cores), each span a multiple of 64 floats past a common aligned start; the output is not assumed
 * 64-byte aligned: a head (< 16 floats) aligns it for the streaming stores; inputs are read with
 * unaligned loads.
 *
 * AVX-512 (__AVX512F__): 4 zmm vectors per iteration; exact vsqrtps + vdivps (IEEE, as the
 *    reference): the whole update costs ~16 cycles per vector in cache on Zen 4, half of the ~32
 *    cycles of DRAM time a vector has per core, and hides under it, so an rsqrt approximation
 *    would buy nothing; when the arrays exceed the caches the output is
 *    written with non-temporal stores (no read-for-ownership: 20 B of traffic per element instead
 *    of 24), then sfence; masked head and tail. With the hardware prefetchers on, the loop
 *    streams as fast as a bare 4-read / 1-write triad (sum4 with streaming stores) does.
 * AVX2 + FMA (__AVX2__ && __FMA__): the same with 8 ymm vectors (64 floats) per iteration, exact
 *    vsqrtps + vdivps, 32-byte aligned vmovntps under the same condition, then sfence; head and
 *    tail by vmaskmovps.
 * Portable (everything else, e.g. SSE-only x86 or aarch64): the formula per element in plain C,
 *    which the compiler vectorizes (#pragma omp simd) for SSE / NEON / SVE. sqrtf would keep the
 *    loop scalar (errno handling), so sqrt(a) is computed from a bit-level guess of 1/sqrt(a), a
 *    Newton step and a second-order correction (within 1 ulp of sqrtf; a = 0 gives 0); ordinary
 *    stores; no intrinsics.
 *
 * Tunables: NT_MIN_KIB (the streaming-store threshold, by default 16 L2s), PAR_MIN (the size below
 * which one thread does it all) and PF_BYTES (software prefetch distance; off by default: on
 * Zen 4 the hardware prefetchers follow the four read streams and it measured no better).
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TOTAL ((size_t)(M) * (size_t)(N))
/* The build passes this machine's per-core L2 size (sysfs); a cross build does not: 1 MiB. */
#ifndef ACCELOPT_L2_BYTES
#define ACCELOPT_L2_BYTES (1 << 20)
#endif
/* Stream the output past the caches once the arrays touched exceed NT_MIN_KIB KiB; 0: derive it
 * as 16 L2s (the order of a last-level cache: below that, the output may still be in cache for
 * whatever reads it next, and a regular store is better). */
#ifndef NT_MIN_KIB
#define NT_MIN_KIB 0 /* tune: 0 2048 16384 131072 */
#endif
#define NT_MIN_BYTES (NT_MIN_KIB ? (size_t)NT_MIN_KIB << 10 : (size_t)16 * ACCELOPT_L2_BYTES)
#define USE_NT (TOTAL * 20 >= NT_MIN_BYTES)
#ifndef PAR_MIN
#define PAR_MIN 4096 /* tune: 1024 4096 65536 */ /* elements: below, the fork costs more than it saves */
#endif
#define PARALLEL (TOTAL >= PAR_MIN)
/* Software prefetch distance in bytes ahead on each of the four input streams; 0: none. Measured
 * on Zen 4 the hardware prefetchers keep up with the four sequential streams: 256 bytes ahead was
 * no better, 1 KiB and more were 10-15 % slower (the prefetches compete with the demand misses),
 * so the default is off; where it helps, a few hundred bytes to a few KiB (the four streams'
 * lines well inside L1d) is the range to try. */
#ifndef PF_BYTES
#define PF_BYTES 0 /* tune: 0 256 1024 4096 */
#endif

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
/* the four 64-byte lines of each input's 256-byte block PF_BYTES past element i (a prefetch
 * never faults, so reaching past the end is harmless) */
static inline void prefetch_block(const float *th, const float *g, const float *m, const float *v,
                                  size_t i) {
#if PF_BYTES > 0
    const size_t e = i + PF_BYTES / 4;
    for (int u = 0; u < 4; u++) {
        _mm_prefetch((const char *)(th + e + 16 * u), _MM_HINT_T0);
        _mm_prefetch((const char *)(g + e + 16 * u), _MM_HINT_T0);
        _mm_prefetch((const char *)(m + e + 16 * u), _MM_HINT_T0);
        _mm_prefetch((const char *)(v + e + 16 * u), _MM_HINT_T0);
    }
#else
    (void)th, (void)g, (void)m, (void)v, (void)i;
#endif
}
#endif

#if defined(__AVX512F__)

static inline __m512 adamw16(__m512 th, __m512 g, __m512 m, __m512 v) {
    const __m512 m1 = _mm512_fmadd_ps(_mm512_set1_ps(0.9f), m, _mm512_mul_ps(_mm512_set1_ps(0.1f), g));
    const __m512 v1 = _mm512_fmadd_ps(_mm512_set1_ps(0.999f), v,
                                      _mm512_mul_ps(_mm512_set1_ps(0.001f), _mm512_mul_ps(g, g)));
    const __m512 den = _mm512_add_ps(_mm512_sqrt_ps(_mm512_mul_ps(_mm512_set1_ps(1000.0f), v1)),
                                     _mm512_set1_ps(1e-8f));
    const __m512 step = _mm512_div_ps(_mm512_mul_ps(_mm512_set1_ps(0.01f), m1), den);
    return _mm512_fmsub_ps(th, _mm512_set1_ps(1.0f - 1e-5f), step);
}

static inline void run_masked(const float *restrict th, const float *restrict g,
                              const float *restrict m, const float *restrict v,
                              float *restrict out, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i += 16) {
        const size_t left = hi - i;
        const __mmask16 k = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        const __m512 r = adamw16(_mm512_maskz_loadu_ps(k, th + i), _mm512_maskz_loadu_ps(k, g + i),
                                 _mm512_maskz_loadu_ps(k, m + i), _mm512_maskz_loadu_ps(k, v + i));
        _mm512_mask_storeu_ps(out + i, k, r);
    }
}

static inline void run_span(const float *restrict th, const float *restrict g,
                            const float *restrict m, const float *restrict v, float *restrict out,
                            size_t lo, size_t hi) {
    size_t i = lo;
    for (; i + 64 <= hi; i += 64) {
        prefetch_block(th, g, m, v, i);
        __m512 r[4];
        for (int u = 0; u < 4; u++) {
            const size_t e = i + 16 * (size_t)u;
            r[u] = adamw16(_mm512_loadu_ps(th + e), _mm512_loadu_ps(g + e), _mm512_loadu_ps(m + e),
                           _mm512_loadu_ps(v + e));
        }
        for (int u = 0; u < 4; u++) {
            if (USE_NT)
                _mm512_stream_ps(out + i + 16 * (size_t)u, r[u]);
            else
                _mm512_store_ps(out + i + 16 * (size_t)u, r[u]);
        }
    }
    run_masked(th, g, m, v, out, i, hi);
    if (USE_NT) _mm_sfence();
}

#elif defined(__AVX2__) && defined(__FMA__)

static inline __m256 adamw8(__m256 th, __m256 g, __m256 m, __m256 v) {
    const __m256 m1 = _mm256_fmadd_ps(_mm256_set1_ps(0.9f), m, _mm256_mul_ps(_mm256_set1_ps(0.1f), g));
    const __m256 v1 = _mm256_fmadd_ps(_mm256_set1_ps(0.999f), v,
                                      _mm256_mul_ps(_mm256_set1_ps(0.001f), _mm256_mul_ps(g, g)));
    const __m256 den = _mm256_add_ps(_mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(1000.0f), v1)),
                                     _mm256_set1_ps(1e-8f));
    const __m256 step = _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(0.01f), m1), den);
    return _mm256_fmsub_ps(th, _mm256_set1_ps(1.0f - 1e-5f), step);
}

static inline void run_masked(const float *restrict th, const float *restrict g,
                              const float *restrict m, const float *restrict v,
                              float *restrict out, size_t lo, size_t hi) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (size_t i = lo; i < hi; i += 8) {
        const size_t left = hi - i;
        const __m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32(left >= 8 ? 8 : (int)left), lane);
        const __m256 r = adamw8(_mm256_maskload_ps(th + i, k), _mm256_maskload_ps(g + i, k),
                                _mm256_maskload_ps(m + i, k), _mm256_maskload_ps(v + i, k));
        _mm256_maskstore_ps(out + i, k, r);
    }
}

static inline void run_span(const float *restrict th, const float *restrict g,
                            const float *restrict m, const float *restrict v, float *restrict out,
                            size_t lo, size_t hi) {
    size_t i = lo;
    for (; i + 64 <= hi; i += 64) {
        prefetch_block(th, g, m, v, i);
        __m256 r[8];
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) {
            const size_t e = i + 8 * (size_t)u;
            r[u] = adamw8(_mm256_loadu_ps(th + e), _mm256_loadu_ps(g + e), _mm256_loadu_ps(m + e),
                          _mm256_loadu_ps(v + e));
        }
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) {
            if (USE_NT)
                _mm256_stream_ps(out + i + 8 * (size_t)u, r[u]);
            else
                _mm256_store_ps(out + i + 8 * (size_t)u, r[u]);
        }
    }
    run_masked(th, g, m, v, out, i, hi);
    if (USE_NT) _mm_sfence();
}

#else /* portable: plain C that the compiler vectorizes, no intrinsics */

/* sqrt(a) for a >= 0 without sqrtf (whose errno path keeps a loop scalar): r ~ 1/sqrt(a) from the
 * exponent/mantissa bits (<= 3.4e-2 relative), one Newton step r *= 1.5 - (a/2) r^2 (<= 1.8e-3),
 * s = a r, then with e = 1 - s r the second-order correction s (1 + e/2 + 3e^2/8) (~1e-8 before
 * rounding: within 1 ulp of sqrtf). a = 0 gives r finite, s = 0. */
static inline float sqrt_nr(float a) {
    uint32_t bits;
    memcpy(&bits, &a, sizeof bits);
    bits = 0x5F375A86u - (bits >> 1);
    float r;
    memcpy(&r, &bits, sizeof r);
    r = r * (1.5f - (0.5f * a) * r * r);
    const float s = a * r;
    const float e = 1.0f - s * r;
    return s + (s * e) * (0.5f + 0.375f * e);
}

static inline void run_masked(const float *restrict th, const float *restrict g,
                              const float *restrict m, const float *restrict v,
                              float *restrict out, size_t lo, size_t hi) {
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        const float m1 = 0.9f * m[i] + 0.1f * g[i];
        const float v1 = 0.999f * v[i] + 0.001f * (g[i] * g[i]);
        const float den = sqrt_nr(1000.0f * v1) + 1e-8f;
        out[i] = th[i] * (1.0f - 1e-5f) - (0.01f * m1) / den;
    }
}

static inline void run_span(const float *restrict th, const float *restrict g,
                            const float *restrict m, const float *restrict v, float *restrict out,
                            size_t lo, size_t hi) {
    run_masked(th, g, m, v, out, lo, hi);
}

#endif

void kernel(const float *restrict theta, const float *restrict g, const float *restrict m,
            const float *restrict v, float *restrict out) {
    /* floats before out + head is 64-byte aligned (out is at least float-aligned) */
    size_t head = (size_t)((64u - ((uintptr_t)out & 63u)) & 63u) / 4u;
    if (head > TOTAL) head = TOTAL;
#pragma omp parallel if (PARALLEL)
    {
        const size_t nt = (size_t)omp_get_num_threads();
        const size_t t = (size_t)omp_get_thread_num();
        if (t == 0 && head) run_masked(theta, g, m, v, out, 0, head);
        const size_t blocks = (TOTAL - head + 63) / 64;
        size_t lo = head + (blocks * t / nt) * 64;
        size_t hi = head + (blocks * (t + 1) / nt) * 64;
        if (hi > TOTAL) hi = TOTAL;
        if (lo < hi) run_span(theta, g, m, v, out, lo, hi);
    }
}
