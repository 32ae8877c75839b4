/* silu expert: y = x / (1 + exp(-x)), elementwise over [M, N].
 *
 * Memory-bound (4 B read + 4 B written per element), so the design has to keep DRAM busy and the
 * arithmetic short enough to hide under it: on Zen 4 the previous exp (degree 5, ln2 in two parts,
 * a two-sided clamp) cost ~12 cycles per zmm, more than the ~9 cycles of DRAM time one zmm has
 * per core, so the loop ran at ~85 % of a plain streaming copy; the exp below (~9 cycles per zmm,
 * divide included) keeps up with the copy. Three paths, picked by the compiler's target macros;
 * all share the work split in kernel():
 *  - the flat M*N array is split into one contiguous span per thread (static, both cores), each
 *    span a multiple of 64 floats (one 256-byte block) past a common start, so no two threads
 *    write one cache line;
 *  - exp(-x) = 2^n exp(-r): n = round(-x*log2e), r = x + n*ln2 (|r| <= ln2/2), exp(-r) a fitted
 *    degree-4 polynomial (<= 2.9e-6 relative on the range: y is within 1.5 % of the checker's
 *    per-element bound, L2 error ~1.4e-7 against 2e-5), then an exact division (x / inf = -0 is the
 *    reference's answer for x << 0). x is clamped above at 30 for the exp only: exp(-30) ~ 1e-13
 *    already rounds 1 + e to 1, and the clamp keeps huge x from turning r into garbage (and keeps
 *    2^n normal: no denormal slow path).
 *
 * AVX-512 (__AVX512F__): 4 zmm vectors (64 floats) per iteration; n by vroundscaleps, ln2 as one
 *    float (the FMA forms x + n*ln2 exactly before its one rounding: only ln2's own error, n *
 *    1.9e-9, remains), 2^n by vscalefps, which also gives exact 0 / inf at the ends (no lower
 *    clamp needed: x << 0 gives n large, 2^n = inf, y = -0; NaN propagates); when the output is
 *    larger than the caches (USE_NT), non-temporal stores write y straight to DRAM (no
 *    read-for-ownership of y: 8 B of traffic per element instead of 12), then sfence; the ragged
 *    tail (M*N not a multiple of 16) uses masked loads/stores; the output is not assumed 64-byte
 *    aligned: a masked head (< 16 floats) aligns y for the streaming stores and x is read with
 *    unaligned loads. A reciprocal (vrcp14ps + a Newton step) instead of vdivps measured slower.
 * AVX2 + FMA (__AVX2__ && __FMA__): 8 ymm vectors (64 floats) per iteration; x is clamped to
 *    [-89, 30] so that n lies in [-44, 128], n is rounded by adding 1.5*2^23 + 127, whose low
 *    bits then hold n + 127: shifted left by 23 they are the float 2^n (n = 128: the bits of +inf,
 *    so x << 0 still gives x / inf = -0); ln2 as one float, the same polynomial; 1 + p*2^n is one
 *    FMA; the same head / streaming / sfence scheme as above (32-byte aligned vmovntps), tails by
 *    vmaskmovps.
 * Portable (everything else, e.g. SSE-only x86 or aarch64): the AVX2 path's exp written per
 *    element in plain C, with ln2 in two parts (without FMA, n*ln2hi has to be exact) and the
 *    clamp on the float's bits with integer min, so that the loop if-converts; the compiler
 *    vectorizes it (#pragma omp simd) for SSE / NEON / SVE; ordinary stores; no intrinsics.
 *
 * Tunables: NT_MIN_KIB (the streaming-store threshold, by default 16 L2s), PAR_MIN (the size below
 * which one thread does it all) and PF_BYTES (software prefetch distance; off by default: on
 * Zen 4 it measured no better than the hardware prefetchers on this single read stream).
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
/* Stream the output past the caches once the arrays touched exceed NT_MIN_KIB KiB; 0: derive
 * it as 16 L2s (the order of a last-level cache: below that, the output may still be in cache
 * for whatever reads it next, and a regular store is better). */
#ifndef NT_MIN_KIB
#define NT_MIN_KIB 0 /* tune: 0 2048 16384 131072 */
#endif
#define NT_MIN_BYTES (NT_MIN_KIB ? (size_t)NT_MIN_KIB << 10 : (size_t)16 * ACCELOPT_L2_BYTES)
#define USE_NT (TOTAL * 8 >= NT_MIN_BYTES)
#ifndef PAR_MIN
#define PAR_MIN 4096 /* tune: 1024 4096 65536 */ /* elements: below, the fork costs more than it saves */
#endif
#define PARALLEL (TOTAL >= PAR_MIN)
/* Software prefetch distance in bytes ahead on the input stream; 0: none. Measured on Zen 4 the
 * hardware prefetchers keep up with one sequential stream and any distance was no better (far
 * ones worse), so the default is off; where it helps, a distance of a few hundred bytes to a few
 * KiB (well inside L1d) is the range to try. */
#ifndef PF_BYTES
#define PF_BYTES 0 /* tune: 0 256 1024 4096 */
#endif

/* exp(-r) ~ 1 + r*(C1 + r*(C2 + r*(C3 + r*C4))) on |r| <= ln2/2: a minimax fit of the relative
 * error (2.9e-6), coefficients rounded to float. */
#define C1 -0.9999668598175049f
#define C2 0.5000301599502563f
#define C3 -0.16787473857402802f
#define C4 0.041513845324516296f
#define LOG2E 1.44269504088896341f
#define LN2 0.693147182464599609375f /* ln2 rounded to float */
#define X_MAX 30.0f                   /* exp(-30) ~ 1e-13: 1 + exp(-x) rounds to 1 beyond */

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
/* the four 64-byte lines of the 256-byte block PF_BYTES past p (a prefetch never faults) */
static inline void prefetch_block(const float *p) {
#if PF_BYTES > 0
    for (int u = 0; u < 4; u++) _mm_prefetch((const char *)(p + PF_BYTES / 4 + 16 * u), _MM_HINT_T0);
#else
    (void)p;
#endif
}
#endif

#if defined(__AVX512F__)

static inline __m512 silu16(__m512 x) {
    const __m512 xc = _mm512_min_ps(x, _mm512_set1_ps(X_MAX));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(-LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(LN2), xc); /* exp(-x) = 2^n exp(-r) */
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(C4), r, _mm512_set1_ps(C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512 d = _mm512_add_ps(_mm512_scalef_ps(p, n), _mm512_set1_ps(1.0f));
    return _mm512_div_ps(x, d);
}

static inline void run_masked(const float *restrict x, float *restrict y, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i += 16) {
        size_t left = hi - i;
        __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        __m512 a = _mm512_maskz_loadu_ps(m, x + i);
        _mm512_mask_storeu_ps(y + i, m, silu16(a));
    }
}

static inline void run_span(const float *restrict x, float *restrict y, size_t lo, size_t hi) {
    size_t i = lo;
    for (; i + 64 <= hi; i += 64) {
        prefetch_block(x + i);
        __m512 a = _mm512_loadu_ps(x + i);
        __m512 b = _mm512_loadu_ps(x + i + 16);
        __m512 c = _mm512_loadu_ps(x + i + 32);
        __m512 d = _mm512_loadu_ps(x + i + 48);
        a = silu16(a);
        b = silu16(b);
        c = silu16(c);
        d = silu16(d);
        if (USE_NT) {
            _mm512_stream_ps(y + i, a);
            _mm512_stream_ps(y + i + 16, b);
            _mm512_stream_ps(y + i + 32, c);
            _mm512_stream_ps(y + i + 48, d);
        } else {
            _mm512_store_ps(y + i, a);
            _mm512_store_ps(y + i + 16, b);
            _mm512_store_ps(y + i + 32, c);
            _mm512_store_ps(y + i + 48, d);
        }
    }
    run_masked(x, y, i, hi);
    if (USE_NT) _mm_sfence();
}

#elif defined(__AVX2__) && defined(__FMA__)

/* exp(-x) = 2^n exp(-r) with n = round(-x*log2e) and r = x + n*ln2, as above; n rounded and
 * 2^n built with integer bits (no vscalefps here), which needs x clamped on both sides. */
static inline __m256 silu8(__m256 x) {
    const __m256 magic = _mm256_set1_ps(12583039.0f); /* 1.5 * 2^23 + 127: rounds, adds the bias */
    /* x in [-89, 30]: n in [-44, 128], 2^n a normal float or (n = 128) the bits of +inf */
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-89.0f)), _mm256_set1_ps(X_MAX));
    const __m256 kn = _mm256_fnmadd_ps(xc, _mm256_set1_ps(LOG2E), magic);
    const __m256 n = _mm256_sub_ps(kn, magic);
    const __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(LN2), xc);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(C4), r, _mm256_set1_ps(C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* the low bits of kn hold n + 127: shifted left by 23 they are the float 2^n */
    const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(kn), 23));
    return _mm256_div_ps(x, _mm256_fmadd_ps(p, scale, _mm256_set1_ps(1.0f)));
}

static inline void run_masked(const float *restrict x, float *restrict y, size_t lo, size_t hi) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (size_t i = lo; i < hi; i += 8) {
        const size_t left = hi - i;
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(left >= 8 ? 8 : (int)left), lane);
        _mm256_maskstore_ps(y + i, m, silu8(_mm256_maskload_ps(x + i, m)));
    }
}

static inline void run_span(const float *restrict x, float *restrict y, size_t lo, size_t hi) {
    size_t i = lo;
    for (; i + 64 <= hi; i += 64) {
        prefetch_block(x + i);
        __m256 v[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) v[k] = silu8(_mm256_loadu_ps(x + i + 8 * k));
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            if (USE_NT)
                _mm256_stream_ps(y + i + 8 * k, v[k]);
            else
                _mm256_store_ps(y + i + 8 * k, v[k]);
        }
    }
    run_masked(x, y, i, hi);
    if (USE_NT) _mm_sfence();
}

#else /* portable: plain C that the compiler vectorizes, no intrinsics */

static inline float silu1(float x) {
    /* x clamped to [-89, 30] (n in [-44, 128]: 2^n a normal float, 2^128 the bits of +inf) on
     * the bits with integer min, which the compiler if-converts and vectorizes (a float ?: is a
     * branch under the default -ftrapping-math): unsigned, the floats <= -89 are the patterns
     * above bits(-89); signed, the floats >= 30 are the patterns above bits(30) */
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    xb = xb < 0xC2B20000u ? xb : 0xC2B20000u;                           /* bits(-89.0f) */
    const int32_t xs = (int32_t)xb < 0x41F00000 ? (int32_t)xb : 0x41F00000; /* bits(30.0f) */
    float xc;
    memcpy(&xc, &xs, sizeof xc);
    /* as the AVX2 path, but ln2 in two parts: without FMA, n*ln2hi must be exact */
    const float kn = 12583039.0f - xc * LOG2E; /* 1.5 * 2^23 + 127 */
    const float n = kn - 12583039.0f;
    float r = xc + n * 0.693359375f;
    r = r + n * -2.12194440e-4f;
    const float p = (((C4 * r + C3) * r + C2) * r + C1) * r + 1.0f;
    uint32_t bits;
    memcpy(&bits, &kn, sizeof bits);
    bits <<= 23; /* the low bits of kn hold n + 127: shifted left by 23 they are 2^n */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x / (p * scale + 1.0f);
}

static inline void run_masked(const float *restrict x, float *restrict y, size_t lo, size_t hi) {
#pragma omp simd
    for (size_t i = lo; i < hi; i++) y[i] = silu1(x[i]);
}

static inline void run_span(const float *restrict x, float *restrict y, size_t lo, size_t hi) {
    run_masked(x, y, lo, hi);
}

#endif

void kernel(const float *restrict x, float *restrict y) {
    /* floats before y + head is 64-byte aligned (y is at least float-aligned) */
    size_t head = (size_t)((64u - ((uintptr_t)y & 63u)) & 63u) / 4u;
    if (head > TOTAL) head = TOTAL;
#pragma omp parallel if (PARALLEL)
    {
        const size_t nt = (size_t)omp_get_num_threads();
        const size_t t = (size_t)omp_get_thread_num();
        if (t == 0 && head) run_masked(x, y, 0, head);
        /* spans in units of 64 floats (one 256-byte block) so every span start is aligned */
        const size_t rest = TOTAL - head;
        const size_t blocks = (rest + 63) / 64;
        size_t lo = head + (blocks * t / nt) * 64;
        size_t hi = head + (blocks * (t + 1) / nt) * 64;
        if (hi > TOTAL) hi = TOTAL;
        if (lo < hi) run_span(x, y, lo, hi);
    }
}
