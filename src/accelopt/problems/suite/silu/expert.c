/* silu expert: y = x / (1 + exp(-x)), elementwise over [M, N].
 *
 * Memory-bound (4 B read + 4 B written per element), so the design only has to keep DRAM busy:
 *  - the flat M*N array is split into one contiguous, 64-byte aligned span per thread
 *    (static, both cores), processed 4 zmm vectors (64 floats) per iteration;
 *  - exp(-x) is a vectorized expf: n = round(t*log2e), r = t - n*ln2 (two-part ln2), a fitted
 *    degree-5 polynomial on |r| <= ln2/2 (<= 1.7e-7 relative), scaled by 2^n with vscalefps, which
 *    also gives exact 0 / inf at the ends (x / inf = -0, the reference's answer for x << 0);
 *  - an exact vdivps (the division is free next to the memory traffic);
 *  - when the output is larger than the caches, non-temporal stores write y straight to DRAM
 *    (no read-for-ownership of y: 8 B of traffic per element instead of 12), then sfence;
 *  - the ragged tail (M*N not a multiple of 16) uses masked loads/stores; the output is not
 *    assumed 64-byte aligned: a masked head (< 16 floats) aligns y for the streaming stores and x
 *    is read with unaligned loads (as fast as aligned ones when x happens to be aligned).
 */
#include <immintrin.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>

#define TOTAL ((size_t)(M) * (size_t)(N))
/* Stream the output when x and y together exceed the last-level cache share. */
#define USE_NT (TOTAL * 8 >= (size_t)8 << 20)
#define PARALLEL (TOTAL >= 4096) /* below that the fork costs more than it saves */

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
