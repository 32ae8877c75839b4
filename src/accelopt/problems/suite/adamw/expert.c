/* adamw expert: one AdamW step at t = 1, elementwise over [M, N]:
 *   m1 = 0.9 m + 0.1 g,  v1 = 0.999 v + 0.001 g^2,
 *   out = theta (1 - 1e-5) - 0.01 m1 / (sqrt(1000 v1) + 1e-8).
 *
 * Memory-bound (16 B read + 4 B written per element, ~1 FLOP per 3 bytes), so the design only has
 * to keep DRAM busy:
 *  - the flat M*N range is split into one contiguous span per thread (static, both cores), each
 *    span a multiple of 64 floats past a common aligned start, 4 zmm vectors per iteration;
 *  - exact vsqrtps + vdivps (IEEE, as the reference): the ~50 cycles of memory time per vector
 *    per core hide them completely, so an rsqrt approximation would buy nothing;
 *  - when the arrays exceed the caches the output is written with non-temporal stores (no
 *    read-for-ownership: 20 B of traffic per element instead of 24), then sfence;
 *  - the output is not assumed 64-byte aligned: a masked head (< 16 floats) aligns it for the
 *    streaming stores; inputs are read with unaligned loads; a masked tail ends each span.
 */
#include <immintrin.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>

#define TOTAL ((size_t)(M) * (size_t)(N))
#define USE_NT (TOTAL * 20 >= (size_t)16 << 20)
#define PARALLEL (TOTAL >= 4096) /* below that the fork costs more than it saves */

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
