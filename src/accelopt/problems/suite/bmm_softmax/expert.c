/* bmm_softmax expert: out[b] = softmax(lhs[b] @ rhs[b]) over the last axis.
 *
 * Compute-bound (2*K FLOPs of matmul per output element against 4 bytes written), so the design is
 * a register-blocked AVX-512 GEMM with the softmax fused behind it, so that the scores never touch
 * DRAM:
 *  - work unit: a block of MR rows of one batch; the units are split statically over both cores;
 *  - rhs[b] ([K, N], row stride 4*N bytes, which maps all K rows of a column panel to a few L1
 *    sets) is packed per thread, when the thread reaches a new batch, into 32-column panels
 *    [N/32][K][32] (zero-padded), 8 KiB per panel for K = 64, read sequentially from L1/L2;
 *  - micro-kernel: MR x 32 scores in 2*MR zmm accumulators, one FMA per (row, 16 columns, k) with
 *    lhs[i, k] broadcast from memory; each finished tile goes to an L2-resident scratch block
 *    (MR rows x N) and updates per-row running maxima;
 *  - softmax per row from the scratch: x = s*log2e - max*log2e (one FMA; the rounding of
 *    max*log2e is common to the row and cancels in the normalization), 2^x = 2^n * p(f) with
 *    n = round(x), f = x - n exact, a fitted degree-5 polynomial (<= 1.9e-7 relative), vscalefps
 *    (underflow goes to 0 as it should), written back to scratch and summed; then one pass
 *    multiplies by 1/sum and writes the row with non-temporal stores (aligned by a masked head
 *    when the row does not start on 64 bytes), an sfence at the end;
 *  - ragged edges: a last row block shorter than MR recomputes its last valid row in the unused
 *    accumulator rows (results discarded); N not a multiple of 32 uses the zero-padded panel and
 *    masked loads/stores over the last columns.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define MR 12                      /* rows per micro-tile */
#define NR 32                      /* columns per micro-tile: 2 zmm */
#define NP ((N + NR - 1) / NR)     /* column panels */
#define NPAD (NP * NR)             /* padded row length of the scratch block */
#define MB ((M + MR - 1) / MR)     /* row blocks per batch */
#define UNITS ((size_t)B * MB)

#define L2E 1.44269504088896341f
#define P5 1.326472731307149e-3f
#define P4 9.671512991189957e-3f
#define P3 5.550733581185341e-2f
#define P2 2.4022242426872253e-1f
#define P1 6.931470036506653e-1f

static inline __m512 exp2_ps(__m512 x) {
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(P5), f, _mm512_set1_ps(P4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(P3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(P2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(P1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static inline __mmask16 tail_mask(int left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
}

/* Pack rhs[K][N] into panels [NP][K][NR], zero-padding the last panel. */
static void pack_rhs(const float *restrict r, float *restrict pk) {
    for (int jp = 0; jp < NP; jp++) {
        const int j0 = jp * NR;
        const __mmask16 m0 = tail_mask(N - j0), m1 = tail_mask(N - j0 - 16);
        float *dst = pk + (size_t)jp * K * NR;
        for (int k = 0; k < K; k++) {
            const float *src = r + (size_t)k * N + j0;
            _mm512_store_ps(dst + k * NR, _mm512_maskz_loadu_ps(m0, src));
            _mm512_store_ps(dst + k * NR + 16,
                            N - j0 > 16 ? _mm512_maskz_loadu_ps(m1, src + 16) : _mm512_setzero_ps());
        }
    }
}

/* Scores of MR rows (row pointers in l[]) against all panels, into sc[MR][NPAD]; row maxima
 * (over the N valid columns) into vmax[MR] lanes. */
static inline void scores_block(const float *const l[MR], const float *restrict pk,
                                float *restrict sc, __m512 vmax[MR]) {
    for (int r = 0; r < MR; r++) vmax[r] = _mm512_set1_ps(-INFINITY);
    for (int jp = 0; jp < NP; jp++) {
        const float *p = pk + (size_t)jp * K * NR;
        __m512 acc[MR][2];
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            acc[r][0] = _mm512_setzero_ps();
            acc[r][1] = _mm512_setzero_ps();
        }
#pragma GCC unroll 4
        for (int k = 0; k < K; k++) {
            const __m512 b0 = _mm512_load_ps(p + k * NR);
            const __m512 b1 = _mm512_load_ps(p + k * NR + 16);
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++) {
                const __m512 a = _mm512_set1_ps(l[r][k]);
                acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
            }
        }
        const int j0 = jp * NR;
        if (j0 + NR <= N) {
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++) {
                _mm512_store_ps(sc + (size_t)r * NPAD + j0, acc[r][0]);
                _mm512_store_ps(sc + (size_t)r * NPAD + j0 + 16, acc[r][1]);
                vmax[r] = _mm512_max_ps(vmax[r], _mm512_max_ps(acc[r][0], acc[r][1]));
            }
        } else {
            const __mmask16 m0 = tail_mask(N - j0), m1 = tail_mask(N - j0 - 16);
            for (int r = 0; r < MR; r++) {
                _mm512_store_ps(sc + (size_t)r * NPAD + j0, acc[r][0]);
                _mm512_store_ps(sc + (size_t)r * NPAD + j0 + 16, acc[r][1]);
                vmax[r] = _mm512_mask_max_ps(vmax[r], m0, vmax[r], acc[r][0]);
                if (N - j0 > 16) vmax[r] = _mm512_mask_max_ps(vmax[r], m1, vmax[r], acc[r][1]);
            }
        }
    }
}

/* Softmax of one scratch row (N valid values, 64-byte aligned) into dst (any float alignment). */
static inline void softmax_row(float *restrict s, __m512 vmax, float *restrict dst) {
    const float mx = _mm512_reduce_max_ps(vmax);
    const __m512 l2e = _mm512_set1_ps(L2E);
    const __m512 ml = _mm512_set1_ps(mx * L2E);
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    int j = 0;
    for (; j + 32 <= N; j += 32) {
        const __m512 e0 = exp2_ps(_mm512_fmsub_ps(_mm512_load_ps(s + j), l2e, ml));
        const __m512 e1 = exp2_ps(_mm512_fmsub_ps(_mm512_load_ps(s + j + 16), l2e, ml));
        _mm512_store_ps(s + j, e0);
        _mm512_store_ps(s + j + 16, e1);
        sum0 = _mm512_add_ps(sum0, e0);
        sum1 = _mm512_add_ps(sum1, e1);
    }
    for (; j < N; j += 16) {
        const __mmask16 m = tail_mask(N - j);
        const __m512 e = exp2_ps(_mm512_fmsub_ps(_mm512_load_ps(s + j), l2e, ml));
        _mm512_store_ps(s + j, e);
        sum0 = _mm512_add_ps(sum0, _mm512_maskz_mov_ps(m, e));
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1)));
    /* head: up to the first 64-byte boundary of dst */
    int head = (int)(((64u - ((uintptr_t)dst & 63u)) & 63u) / 4u);
    if (head > N) head = N;
    if (head) {
        const __mmask16 m = tail_mask(head);
        _mm512_mask_storeu_ps(dst, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s), inv));
    }
    j = head;
    for (; j + 16 <= N; j += 16)
        _mm512_stream_ps(dst + j, _mm512_mul_ps(_mm512_loadu_ps(s + j), inv));
    if (j < N) {
        const __mmask16 m = tail_mask(N - j);
        _mm512_mask_storeu_ps(dst + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), inv));
    }
}

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
#pragma omp parallel if (UNITS > 1 && (double)B * M * N * K > 1e4)
    {
        const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        const size_t u0 = UNITS * t / nt, u1 = UNITS * (t + 1) / nt;
        float *pk = aligned_alloc(64, sizeof(float) * (size_t)NP * K * NR);
        float *sc = aligned_alloc(64, sizeof(float) * (size_t)MR * NPAD);
        int packed = -1;
        if (pk != NULL && sc != NULL) {
            for (size_t u = u0; u < u1; u++) {
                const int b = (int)(u / MB), i0 = (int)(u % MB) * MR;
                if (b != packed) {
                    pack_rhs(rhs + (size_t)b * K * N, pk);
                    packed = b;
                }
                const int rows = M - i0 < MR ? M - i0 : MR;
                const float *l[MR];
                for (int r = 0; r < MR; r++)
                    l[r] = lhs + ((size_t)b * M + i0 + (r < rows ? r : rows - 1)) * K;
                __m512 vmax[MR];
                scores_block(l, pk, sc, vmax);
                for (int r = 0; r < rows; r++)
                    softmax_row(sc + (size_t)r * NPAD, vmax[r], out + ((size_t)b * M + i0 + r) * N);
            }
            _mm_sfence();
        }
        free(pk);
        free(sc);
    }
}
