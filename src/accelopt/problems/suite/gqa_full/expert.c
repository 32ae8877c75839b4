/* gqa_full expert: non-causal grouped-query attention,
 *   out[b, h, i, :] = softmax_j(q[b, i, h, :] . k[b, j, kvh, :] / sqrt(D)) v[b, j, kvh, :],
 *   kvh = h / (QH / KH).
 *
 * Compute-bound (4*N*D FLOPs per query row against 8*D bytes), so the design is two register-
 * blocked AVX-512 GEMMs with the softmax between them, all on one block of query rows at a time
 * (the scores never leave L1/L2):
 *  - work unit: MR = 12 query rows of one (batch, query head); units are ordered so that the
 *    query heads sharing a kv head are consecutive, and split statically over both cores;
 *  - K of the current (batch, kv head) is transposed once per thread into 32-key panels
 *    [N/32][D][32] (16x16 in-register transposes, zero-padded keys), so S = Q K^T is a
 *    12 x 32 micro-kernel (24 zmm accumulators, q[i, d] broadcast from memory);
 *  - softmax per row: x = s*c - max*c with c = log2e/sqrt(D) (one FMA; the rounding of max*c is
 *    common to the row and cancels in the normalization), 2^x = 2^n * p(f) with n = round(x),
 *    f = x - n exact, a fitted degree-5 polynomial (<= 1.9e-7 relative), vscalefps; the
 *    unnormalized weights stay in the scratch block and their sum is kept;
 *  - V of the kv head is copied once per thread into a contiguous [N][D] block (its rows are
 *    4*KH*D bytes apart in the input: for KH*D = 1024 one row per 4 KiB page, which hardware
 *    prefetchers do not follow), then O = P V is a 6-row x 64-column micro-kernel (24 zmm
 *    accumulators) streaming that block, P[i, j] broadcast from the scratch block; the 1/sum normalization is applied to the D outputs, not the N weights;
 *  - ragged edges: a short last row block recomputes its last valid row; keys past N are zero in
 *    the panels and excluded from max and sum; D not a multiple of 16 uses masked loads/stores.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define G (QH / KH)
#define MR 12                   /* query rows per work unit (and GEMM1 micro-tile) */
#define NR 32                   /* keys per GEMM1 micro-tile: 2 zmm */
#define MR2 6                   /* query rows per GEMM2 micro-tile */
#define DC 64                   /* output columns per GEMM2 micro-tile: 4 zmm */
#define NPAN ((N + NR - 1) / NR)
#define NPAD (NPAN * NR)
#define RB ((N + MR - 1) / MR)  /* row blocks per (batch, query head) */
#define UNITS ((size_t)B * QH * RB)

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
    if (left <= 0) return 0;
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
}

/* In-place transpose of 16 vectors (rows) of 16 floats. */
static inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 2; j++) {
            __m512d a = _mm512_castps_pd(t[4 * i + j]);
            __m512d b = _mm512_castps_pd(t[4 * i + 2 + j]);
            r[4 * i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
            r[4 * i + 2 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        }
    }
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k < 4; k++) {
            t[8 * i + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0x88);
            t[8 * i + 4 + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0xDD);
        }
    }
    for (int k = 0; k < 4; k++) {
        for (int j = 0; j < 2; j++) {
            __m512 lo = t[4 * j + k], hi = t[8 + 4 * j + k];
            r[k + 4 * j] = _mm512_shuffle_f32x4(lo, hi, 0x88);
            r[k + 4 * j + 8] = _mm512_shuffle_f32x4(lo, hi, 0xDD);
        }
    }
}

/* K^T panels of one (batch, kv head): pk[jp][d][NR] = k[j0 + jj][d], zero for keys >= N. */
static void pack_kt(const float *restrict kb, float *restrict pk) {
    const size_t ks = (size_t)KH * D; /* floats between consecutive keys */
    for (int j0 = 0; j0 < NPAD; j0 += 16) {
        float *panel = pk + (size_t)(j0 / NR) * D * NR + (j0 % NR);
        for (int d0 = 0; d0 < D; d0 += 16) {
            const __mmask16 dm = tail_mask(D - d0);
            __m512 r[16];
            for (int jj = 0; jj < 16; jj++)
                r[jj] = j0 + jj < N ? _mm512_maskz_loadu_ps(dm, kb + (size_t)(j0 + jj) * ks + d0)
                                    : _mm512_setzero_ps();
            transpose16(r); /* r[dd] = keys j0..j0+15 of dimension d0 + dd */
            for (int dd = 0; dd < 16 && d0 + dd < D; dd++)
                _mm512_store_ps(panel + (size_t)(d0 + dd) * NR, r[dd]);
        }
    }
}

/* S = Q K^T for MR rows into sc[MR][NPAD]; row maxima over the N valid keys into vmax. */
static inline void scores(const float *const qr[MR], const float *restrict pk,
                          float *restrict sc, __m512 vmax[MR]) {
    for (int r = 0; r < MR; r++) vmax[r] = _mm512_set1_ps(-INFINITY);
    for (int jp = 0; jp < NPAN; jp++) {
        const float *p = pk + (size_t)jp * D * NR;
        __m512 acc[MR][2];
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            acc[r][0] = _mm512_setzero_ps();
            acc[r][1] = _mm512_setzero_ps();
        }
#pragma GCC unroll 4
        for (int d = 0; d < D; d++) {
            const __m512 b0 = _mm512_load_ps(p + (size_t)d * NR);
            const __m512 b1 = _mm512_load_ps(p + (size_t)d * NR + 16);
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++) {
                const __m512 a = _mm512_set1_ps(qr[r][d]);
                acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
            }
        }
        const int j0 = jp * NR;
        const __mmask16 m0 = tail_mask(N - j0), m1 = tail_mask(N - j0 - 16);
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            _mm512_store_ps(sc + (size_t)r * NPAD + j0, acc[r][0]);
            _mm512_store_ps(sc + (size_t)r * NPAD + j0 + 16, acc[r][1]);
            vmax[r] = _mm512_mask_max_ps(vmax[r], m0, vmax[r], acc[r][0]);
            vmax[r] = _mm512_mask_max_ps(vmax[r], m1, vmax[r], acc[r][1]);
        }
    }
}

/* Unnormalized softmax weights of one row, in place (keys >= N set to 0); returns their sum. */
static inline float weights(float *restrict s, __m512 vmax) {
    const float c = L2E / sqrtf((float)D);
    const __m512 cv = _mm512_set1_ps(c);
    const __m512 mc = _mm512_set1_ps(_mm512_reduce_max_ps(vmax) * c);
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    for (int j = 0; j < NPAD; j += 32) {
        const __mmask16 m0 = tail_mask(N - j), m1 = tail_mask(N - j - 16);
        const __m512 e0 = _mm512_maskz_mov_ps(m0, exp2_ps(_mm512_fmsub_ps(_mm512_load_ps(s + j), cv, mc)));
        const __m512 e1 = _mm512_maskz_mov_ps(m1, exp2_ps(_mm512_fmsub_ps(_mm512_load_ps(s + j + 16), cv, mc)));
        _mm512_store_ps(s + j, e0);
        _mm512_store_ps(s + j + 16, e1);
        sum0 = _mm512_add_ps(sum0, e0);
        sum1 = _mm512_add_ps(sum1, e1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1));
}

/* O[:, d0 : d0 + 16*NQ] = P V for rows [r0, r0 + MR2) of the block, scaled by inv[r], into orow[r];
 * NQ (1..4) zmm columns, the last one masked by dm[NQ - 1]. */
static inline __attribute__((always_inline)) void
pv_tile(const float *restrict sc, int r0, const float *restrict vb, int d0, const int NQ,
        const __mmask16 dm[4], const float inv[MR], float *const orow[MR]) {
    __m512 acc[MR2][4];
#pragma GCC unroll 8
    for (int r = 0; r < MR2; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NQ; c++) acc[r][c] = _mm512_setzero_ps();
    const float *pr = sc + (size_t)r0 * NPAD;
#pragma GCC unroll 2
    for (int j = 0; j < N; j++) {
        const float *vr = vb + (size_t)j * D + d0;
        __m512 w[4];
#pragma GCC unroll 4
        for (int c = 0; c < NQ; c++) w[c] = _mm512_maskz_loadu_ps(dm[c], vr + 16 * c);
#pragma GCC unroll 8
        for (int r = 0; r < MR2; r++) {
            const __m512 p = _mm512_set1_ps(pr[(size_t)r * NPAD + j]);
#pragma GCC unroll 4
            for (int c = 0; c < NQ; c++) acc[r][c] = _mm512_fmadd_ps(p, w[c], acc[r][c]);
        }
    }
    for (int r = 0; r < MR2; r++) {
        if (orow[r0 + r] == NULL) continue;
        const __m512 s = _mm512_set1_ps(inv[r0 + r]);
        for (int c = 0; c < NQ; c++)
            _mm512_mask_storeu_ps(orow[r0 + r] + d0 + 16 * c, dm[c], _mm512_mul_ps(acc[r][c], s));
    }
}

/* O = P V for rows [r0, r0 + MR2) of the block, in column tiles of up to DC. */
static inline void pv(const float *restrict sc, int r0, const float *restrict vb,
                      const float inv[MR], float *const orow[MR]) {
    for (int d0 = 0; d0 < D; d0 += DC) {
        __mmask16 dm[4];
        for (int c = 0; c < 4; c++) dm[c] = tail_mask(D - d0 - 16 * c);
        const int left = D - d0;
        switch (left >= DC ? 4 : (left + 15) / 16) {
        case 4: pv_tile(sc, r0, vb, d0, 4, dm, inv, orow); break;
        case 3: pv_tile(sc, r0, vb, d0, 3, dm, inv, orow); break;
        case 2: pv_tile(sc, r0, vb, d0, 2, dm, inv, orow); break;
        default: pv_tile(sc, r0, vb, d0, 1, dm, inv, orow); break;
        }
    }
}

void kernel(const float *restrict q, const float *restrict k, const float *restrict v,
            float *restrict out) {
#pragma omp parallel if ((double)B * QH * N * N * D > 1e5)
    {
        const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        const size_t u0 = UNITS * t / nt, u1 = UNITS * (t + 1) / nt;
        float *pk = aligned_alloc(64, sizeof(float) * (size_t)NPAN * D * NR);
        float *pvk = aligned_alloc(64, sizeof(float) * (size_t)N * D + 64);
        float *sc = aligned_alloc(64, sizeof(float) * (size_t)MR * NPAD);
        long packed = -1;
        if (pk != NULL && sc != NULL && pvk != NULL) {
            for (size_t u = u0; u < u1; u++) {
                /* unit order: batch, kv head, group member, row block */
                const int rb = (int)(u % RB);
                const size_t bh = u / RB; /* b * QH + h, with h = kvh * G + member */
                const int b = (int)(bh / QH), h = (int)(bh % QH), kvh = h / G;
                const long key = (long)b * KH + kvh;
                if (key != packed) {
                    pack_kt(k + (size_t)b * N * KH * D + (size_t)kvh * D, pk);
                    const float *vsrc = v + (size_t)b * N * KH * D + (size_t)kvh * D;
                    for (int j = 0; j < N; j++)
                        memcpy(pvk + (size_t)j * D, vsrc + (size_t)j * KH * D, sizeof(float) * D);
                    packed = key;
                }
                const int i0 = rb * MR;
                const int rows = N - i0 < MR ? N - i0 : MR;
                const float *qr[MR];
                float *orow[MR];
                for (int r = 0; r < MR; r++) {
                    const int i = i0 + (r < rows ? r : rows - 1);
                    qr[r] = q + (((size_t)b * N + i) * QH + h) * D;
                    orow[r] = r < rows ? out + (((size_t)b * QH + h) * N + i0 + r) * D : NULL;
                }
                __m512 vmax[MR];
                scores(qr, pk, sc, vmax);
                float inv[MR];
                for (int r = 0; r < MR; r++) inv[r] = 1.0f / weights(sc + (size_t)r * NPAD, vmax[r]);
                for (int r0 = 0; r0 < MR; r0 += MR2) pv(sc, r0, pvk, inv, orow);
            }
        }
        free(pk);
        free(pvk);
        free(sc);
    }
}
