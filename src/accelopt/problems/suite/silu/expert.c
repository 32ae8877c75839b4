/* silu expert: y = x / (1 + exp(-x)), elementwise over [M, N].
 *
 * Memory-bound (4 B read + 4 B written per element), so the design only has to keep DRAM busy.
 * Three paths, picked by the compiler's target macros; all share the work split in kernel():
 *  - the flat M*N array is split into one contiguous span per thread (static, both cores), each
 *    span a multiple of 64 floats (one 256-byte block) past a common start;
 *  - exp(-x) is a vectorized expf: n = round(-x*log2e), r = -x - n*ln2, a fitted degree-5
 *    polynomial on |r| <= ln2/2 (<= 1.7e-7 relative), scaled by 2^n; then an exact division
 *    (nearly free next to the memory traffic); x / inf = -0 is the reference's answer for x << 0.
 *
 * AVX-512 (__AVX512F__): 4 zmm vectors (64 floats) per iteration; ln2 in two parts; 2^n by
 *    vscalefps, which also gives exact 0 / inf at the ends; when the output is larger than the
 *    caches, non-temporal stores write y straight to DRAM (no read-for-ownership of y: 8 B of
 *    traffic per element instead of 12), then sfence; the ragged tail (M*N not a multiple of 16)
 *    uses masked loads/stores; the output is not assumed 64-byte aligned: a masked head
 *    (< 16 floats) aligns y for the streaming stores and x is read with unaligned loads.
 * AVX2 + FMA (__AVX2__ && __FMA__): 8 ymm vectors (64 floats) per iteration; x is clamped to
 *    [-89, 87] so that n lies in [-126, 128], n is rounded by adding 1.5*2^23 + 127, whose low
 *    bits then hold n + 127: shifted left by 23 they are the float 2^n (n = 128: the bits of +inf,
 *    so x << 0 still gives x / inf = -0); ln2 as one float and the polynomial in Estrin form keep
 *    the dependency chain short (<= 5e-7 relative in all); 1 + p*2^n is one FMA; the same head /
 *    streaming / sfence scheme as above (32-byte aligned vmovntps), tails by vmaskmovps.
 * Portable (everything else, e.g. SSE-only x86 or aarch64): the AVX2 path's exp written per
 *    element in plain C, with ln2 in two parts (without FMA, n*ln2hi has to be exact) and the
 *    clamp on the float's bits with integer min, so that the loop if-converts; the compiler
 *    vectorizes it (#pragma omp simd) for SSE / NEON / SVE; ordinary stores; no intrinsics.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TOTAL ((size_t)(M) * (size_t)(N))
/* Stream the output when x and y together exceed the last-level cache share. */
#ifndef NT_MIN_MIB
#define NT_MIN_MIB 8 /* tune: 0 8 128 4096 */ /* stream the output from this many MiB touched */
#endif
#define USE_NT (TOTAL * 8 >= ((size_t)NT_MIN_MIB << 20))
#ifndef PAR_MIN
#define PAR_MIN 4096 /* tune: 1024 4096 65536 */ /* elements: below, the fork costs more than it saves */
#endif
#define PARALLEL (TOTAL >= PAR_MIN)

#if defined(__AVX512F__)

static inline __m512 silu16(__m512 x) {
    const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
    const __m512 ln2hi = _mm512_set1_ps(0.693359375f);
    const __m512 ln2lo = _mm512_set1_ps(-2.12194440e-4f);
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 t = _mm512_sub_ps(_mm512_setzero_ps(), x); /* t = -x */
    t = _mm512_max_ps(t, _mm512_set1_ps(-100.0f));
    t = _mm512_min_ps(t, _mm512_set1_ps(100.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, ln2hi, t);
    r = _mm512_fnmadd_ps(n, ln2lo, r);
    /* exp(r) on |r| <= ln2/2: degree-5 minimax-weighted polynomial, 1 + r*q(r), <= 1.7e-7 rel */
    __m512 p = _mm512_set1_ps(8.265268057584763e-3f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.189871624112129e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6668051481246948e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.9999141693115234e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(9.999995827674866e-1f));
    p = _mm512_fmadd_ps(p, r, one);
    __m512 e = _mm512_scalef_ps(p, n);
    return _mm512_div_ps(x, _mm512_add_ps(one, e));
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

/* exp(-x) = 2^n * exp(r) with n = round(-x*log2e) and r = -x - n*ln2; written with r' = -r =
 * x + n*ln2 and the polynomial's odd coefficients negated (no negation of x); ln2 is one float
 * (the FMA forms x + n*ln2 exactly before its one rounding, so only ln2's own error remains:
 * n * 1.9e-9); the polynomial split as (c0 + c1 r) + r^2 (c2 + c3 r) + r^4 (c4 + c5 r) for a
 * short dependency chain (the loop is latency-bound on 16 registers otherwise). */
static inline __m256 silu8(__m256 x) {
    const __m256 magic = _mm256_set1_ps(12583039.0f); /* 1.5 * 2^23 + 127: rounds, adds the bias */
    /* x in [-89, 87]: n in [-126, 128], 2^n a normal float or (n = 128) the bits of +inf */
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-89.0f)), _mm256_set1_ps(87.0f));
    const __m256 kn = _mm256_fnmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), magic);
    const __m256 n = _mm256_sub_ps(kn, magic);
    const __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(0.693147182464599609375f), xc);
    const __m256 r2 = _mm256_mul_ps(r, r);
    const __m256 c01 = _mm256_fmadd_ps(_mm256_set1_ps(-9.999995827674866e-1f), r, _mm256_set1_ps(1.0f));
    const __m256 c23 = _mm256_fmadd_ps(_mm256_set1_ps(-1.6668051481246948e-1f), r,
                                       _mm256_set1_ps(4.9999141693115234e-1f));
    const __m256 c45 = _mm256_fmadd_ps(_mm256_set1_ps(-8.265268057584763e-3f), r,
                                       _mm256_set1_ps(4.189871624112129e-2f));
    const __m256 p = _mm256_fmadd_ps(r2, _mm256_fmadd_ps(r2, c45, c23), c01);
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
    /* x clamped to [-89, 87] (n in [-126, 128]: 2^n a normal float, 2^128 the bits of +inf) on
     * the bits with integer min, which the compiler if-converts and vectorizes (a float ?: is a
     * branch under the default -ftrapping-math): unsigned, the floats <= -89 are the patterns
     * above bits(-89); signed, the floats >= 87 are the patterns above bits(87) */
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    xb = xb < 0xC2B20000u ? xb : 0xC2B20000u;                           /* bits(-89.0f) */
    const int32_t xs = (int32_t)xb < 0x42AE0000 ? (int32_t)xb : 0x42AE0000; /* bits(87.0f) */
    float xc;
    memcpy(&xc, &xs, sizeof xc);
    /* as the AVX2 path, but ln2 in two parts: without FMA, n*ln2hi must be exact */
    const float kn = 12583039.0f - xc * 1.44269504088896341f; /* 1.5 * 2^23 + 127 */
    const float n = kn - 12583039.0f;
    float r = xc + n * 0.693359375f;
    r = r + n * -2.12194440e-4f;
    const float r2 = r * r;
    const float c01 = r * -9.999995827674866e-1f + 1.0f;
    const float c23 = r * -1.6668051481246948e-1f + 4.9999141693115234e-1f;
    const float c45 = r * -8.265268057584763e-3f + 4.189871624112129e-2f;
    const float p = (c45 * r2 + c23) * r2 + c01;
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
