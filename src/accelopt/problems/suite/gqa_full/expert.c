/* gqa_full expert: non-causal grouped-query attention,
 *   out[b, h, i, :] = softmax_j(q[b, i, h, :] . k[b, j, kvh, :] / sqrt(D)) v[b, j, kvh, :],
 *   kvh = h / (QH / KH).
 * Three code paths, chosen by the compiler's target:
 *  - AVX-512 (__AVX512F__), described below;
 *  - AVX2 + FMA (__AVX2__ and __FMA__, e.g. Zen 3, Haswell): the same units and softmax with
 *    6 x 16 ymm tiles for both GEMMs (12 accumulators), 8x8 in-register transposes for the K^T
 *    panels, V copied into 16-column panels, 2^x via an exponent-field add instead of vscalefps,
 *    masked edges with _mm256_maskload_ps / _mm256_maskstore_ps (details at that path);
 *  - portable (anything else, aarch64 included): the AVX2 path's structure written with GCC
 *    vector extensions (4-wide; 6 x 16 tiles on aarch64, 6 x 8 elsewhere), plain C transposes.
 *
 * AVX-512 path.  Compute-bound (4*N*D FLOPs per query row against 8*D bytes), so the design is
 * two register-blocked AVX-512 GEMMs with the softmax between them, all on one block of query
 * rows at a time (the scores never leave L1/L2):
 *  - work unit: MR = 12 query rows of one (batch, query head); units are ordered so that the
 *    query heads sharing a kv head are consecutive, and split statically over both cores; the
 *    12 rows are first copied into a contiguous block of row stride QLD (in the input they are
 *    4*QH*D bytes apart: for QH*D = 1024 all in one L1 set, more lines than its ways), as in the
 *    other paths; the scratch score rows are SCLD = NPAD + LDPAD floats apart;
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
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The machine-dependent parameter.  Nothing here is blocked for a cache size: the K^T panels and
 * V of one (batch, kv head), 2*N*D*4 bytes (512 KiB at the cpu workload), are meant to stay in L2
 * for all the units that use them, and a unit's score block (MR x N) in L1/L2; the register tiles
 * (MR, NR, MR2, DC, R6, KP) follow the ISA.  What depends on the cache geometry is the padding:
 * LDPAD, floats added to the row stride of the copied query rows (QLD = D + LDPAD) and of the
 * score rows (SCLD = NPAD + LDPAD), one 64-byte line by default, so that rows whose stride is a
 * multiple of 4 KiB (the L1d way size of a 32 KiB 8-way or 48 KiB 12-way L1d) do not all fall into
 * the same L1 sets; 0: no padding, 32: two lines (128-byte lines).  A multiple of 16 (the score
 * rows are read with aligned loads). */
#ifndef LDPAD
#define LDPAD 16 /* tune: 0 16 32 */
#endif

#if defined(__AVX512F__)
#define G (QH / KH)
#define MR 12                   /* query rows per work unit (and GEMM1 micro-tile) */
#define NR 32                   /* keys per GEMM1 micro-tile: 2 zmm */
#define MR2 6                   /* query rows per GEMM2 micro-tile */
#define DC 64                   /* output columns per GEMM2 micro-tile: 4 zmm */
#define NPAN ((N + NR - 1) / NR)
#define NPAD (NPAN * NR)
#define SCLD (NPAD + LDPAD)     /* row stride of the score block */
#define QLD (D + LDPAD)         /* row stride of the copied query rows */
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

/* S = Q K^T for MR rows into sc[MR][SCLD]; row maxima over the N valid keys into vmax. */
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
            _mm512_store_ps(sc + (size_t)r * SCLD + j0, acc[r][0]);
            _mm512_store_ps(sc + (size_t)r * SCLD + j0 + 16, acc[r][1]);
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
    const float *pr = sc + (size_t)r0 * SCLD;
#pragma GCC unroll 2
    for (int j = 0; j < N; j++) {
        const float *vr = vb + (size_t)j * D + d0;
        __m512 w[4];
#pragma GCC unroll 4
        for (int c = 0; c < NQ; c++) w[c] = _mm512_maskz_loadu_ps(dm[c], vr + 16 * c);
#pragma GCC unroll 8
        for (int r = 0; r < MR2; r++) {
            const __m512 p = _mm512_set1_ps(pr[(size_t)r * SCLD + j]);
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
        float *sc = aligned_alloc(64, sizeof(float) * (size_t)MR * SCLD);
        float *qb = aligned_alloc(64, sizeof(float) * (size_t)MR * QLD);
        long packed = -1;
        if (pk != NULL && sc != NULL && pvk != NULL && qb != NULL) {
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
                    qr[r] = qb + (size_t)r * QLD;
                    memcpy(qb + (size_t)r * QLD, q + (((size_t)b * N + i) * QH + h) * D,
                           sizeof(float) * D);
                    orow[r] = r < rows ? out + (((size_t)b * QH + h) * N + i0 + r) * D : NULL;
                }
                __m512 vmax[MR];
                scores(qr, pk, sc, vmax);
                float inv[MR];
                for (int r = 0; r < MR; r++) inv[r] = 1.0f / weights(sc + (size_t)r * SCLD, vmax[r]);
                for (int r0 = 0; r0 < MR; r0 += MR2) pv(sc, r0, pvk, inv, orow);
            }
        }
        free(pk);
        free(pvk);
        free(sc);
        free(qb);
    }
}

#else
/* ---------------------------------------------------------------------------------------------
 * AVX2 + FMA and portable paths: the same work units, order and softmax, with 12-accumulator
 * tiles.  The 12 query rows of a unit are first copied into a contiguous block (in the input
 * they are 4*QH*D bytes apart: for QH*D = 1024 all in one L1 set).  K^T panels hold KP keys
 * ([NPAN][D][KP]); V is copied into zero-padded column panels of DP dimensions ([DPAN][N][DP]),
 * so that each GEMM2 tile streams one contiguous panel.  Both GEMMs use R6 x KP / R6 x DP
 * register tiles (two per 12-row unit); the score rows are SCLD floats apart, LDPAD (one cache
 * line) more than NPAD, so that a power-of-two N does not put the 6 rows of a tile into 2 L1 sets.
 * 2^x as in the AVX-512 path, the 2^n factor built in the exponent field (x clamped at -126).
 * --------------------------------------------------------------------------------------------- */
#define G (QH / KH)
#define MR 12                   /* query rows per work unit */
#define R6 6                    /* query rows per GEMM1 and GEMM2 micro-tile */
#define QLD (D + LDPAD)         /* row stride of the copied query rows */
#if defined(__AVX2__) && defined(__FMA__)
#define VL 8                    /* floats per vector */
#define NVK 2                   /* vectors per micro-tile row: 6 x 16, 12 ymm accumulators */
#elif defined(__aarch64__)
#define VL 4
#define NVK 4                   /* 6 x 16, 24 of the 32 vector registers */
#else
#define VL 4
#define NVK 2                   /* 6 x 8, 12 of 16 vector registers */
#endif
#define KP (VL * NVK)           /* keys per K^T panel, columns per V panel */
#define DP KP
#define NPAN ((N + KP - 1) / KP)
#define NPAD (NPAN * KP)
#define DPAN ((D + DP - 1) / DP)
#define SCLD (NPAD + LDPAD)
#define RB ((N + MR - 1) / MR)  /* row blocks per (batch, query head) */
#define UNITS ((size_t)B * QH * RB)

#define L2E 1.44269504088896341f
#define P5 1.326472731307149e-3f
#define P4 9.671512991189957e-3f
#define P3 5.550733581185341e-2f
#define P2 2.4022242426872253e-1f
#define P1 6.931470036506653e-1f

/* V of one (batch, kv head) into panels vp[dp][j][DP] = v[j][dp*DP + dd], zero past D */
static void pack_v(const float *restrict vb, float *restrict vp) {
    const size_t vs = (size_t)KH * D; /* floats between consecutive keys */
    for (int dp = 0; dp < DPAN; dp++) {
        const int d0 = dp * DP, w = D - d0 < DP ? D - d0 : DP;
        float *dst = vp + (size_t)dp * N * DP;
        for (int j = 0; j < N; j++, dst += DP) {
            const float *src = vb + (size_t)j * vs + d0;
            if (w == DP) {
                memcpy(dst, src, sizeof(float) * DP);
            } else {
                for (int dd = 0; dd < w; dd++) dst[dd] = src[dd];
                for (int dd = w; dd < DP; dd++) dst[dd] = 0.0f;
            }
        }
    }
}

#if defined(__AVX2__) && defined(__FMA__)
/* ---- AVX2 + FMA helpers ---- */
static const int32_t mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* the first n lanes (n clamped to 0..8) */
static inline __m256i lanes(int n) {
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_loadu_si256((const __m256i *)(mask_tab + 8 - n));
}

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 2^x for x <= 0.5 (x < -126 flushed to 2^-126): 2^n * p(x - n), n = round(x) */
static inline __m256 exp2_ps(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-126.0f));
    const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_sub_ps(x, n);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(P5), f, _mm256_set1_ps(P4));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(P3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(P2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(P1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* In-place transpose of 8 vectors (rows) of 8 floats. */
static inline void transpose8(__m256 r[8]) {
    __m256 t[8], s[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        s[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
        s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
        s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x31);
    }
}

/* K^T panels of one (batch, kv head): pk[jp][d][KP] = k[j0 + jj][d], zero for keys >= N. */
static void pack_kt(const float *restrict kb, float *restrict pk) {
    const size_t ks = (size_t)KH * D; /* floats between consecutive keys */
    for (int j0 = 0; j0 < NPAD; j0 += 8) {
        float *panel = pk + (size_t)(j0 / KP) * D * KP + (j0 % KP);
        for (int d0 = 0; d0 < D; d0 += 8) {
            const __m256i dm = lanes(D - d0);
            __m256 r[8];
            for (int jj = 0; jj < 8; jj++)
                r[jj] = j0 + jj < N ? (D - d0 >= 8 ? _mm256_loadu_ps(kb + (size_t)(j0 + jj) * ks + d0)
                                                   : _mm256_maskload_ps(kb + (size_t)(j0 + jj) * ks + d0, dm))
                                    : _mm256_setzero_ps();
            transpose8(r); /* r[dd] = keys j0..j0+7 of dimension d0 + dd */
            for (int dd = 0; dd < 8 && d0 + dd < D; dd++) _mm256_store_ps(panel + (size_t)(d0 + dd) * KP, r[dd]);
        }
    }
}

/* S = Q K^T for the MR rows of qb into sc[MR][SCLD]; row maxima over the N valid keys. */
static inline void scores(const float *restrict qb, const float *restrict pk, float *restrict sc,
                          float mx[MR]) {
    __m256 vmax[MR];
    for (int r = 0; r < MR; r++) vmax[r] = _mm256_set1_ps(-INFINITY);
    for (int jp = 0; jp < NPAN; jp++) {
        const float *p = pk + (size_t)jp * D * KP;
        const int j0 = jp * KP;
        for (int r0 = 0; r0 < MR; r0 += R6) {
            const float *a = qb + (size_t)r0 * QLD;
            __m256 acc[R6][2];
#pragma GCC unroll 8
            for (int r = 0; r < R6; r++) {
                acc[r][0] = _mm256_setzero_ps();
                acc[r][1] = _mm256_setzero_ps();
            }
#pragma GCC unroll 4
            for (int d = 0; d < D; d++) {
                const __m256 b0 = _mm256_load_ps(p + (size_t)d * KP);
                const __m256 b1 = _mm256_load_ps(p + (size_t)d * KP + 8);
#pragma GCC unroll 8
                for (int r = 0; r < R6; r++) {
                    const __m256 av = _mm256_broadcast_ss(a + (size_t)r * QLD + d);
                    acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
                }
            }
#pragma GCC unroll 8
            for (int r = 0; r < R6; r++) {
                float *s = sc + (size_t)(r0 + r) * SCLD + j0;
                _mm256_store_ps(s, acc[r][0]);
                _mm256_store_ps(s + 8, acc[r][1]);
                if (j0 + KP <= N) {
                    vmax[r0 + r] = _mm256_max_ps(vmax[r0 + r], _mm256_max_ps(acc[r][0], acc[r][1]));
                } else { /* keys past N (zero in the panels) take no part */
                    const __m256 ninf = _mm256_set1_ps(-INFINITY);
                    const __m256 x0 = _mm256_blendv_ps(ninf, acc[r][0], _mm256_castsi256_ps(lanes(N - j0)));
                    const __m256 x1 = _mm256_blendv_ps(ninf, acc[r][1], _mm256_castsi256_ps(lanes(N - j0 - 8)));
                    vmax[r0 + r] = _mm256_max_ps(vmax[r0 + r], _mm256_max_ps(x0, x1));
                }
            }
        }
    }
    for (int r = 0; r < MR; r++) mx[r] = hmax8(vmax[r]);
}

/* Unnormalized softmax weights of one row, in place (keys >= N set to 0); returns their sum. */
static inline float weights(float *restrict s, float mx) {
    const float c = L2E / sqrtf((float)D);
    const __m256 cv = _mm256_set1_ps(c);
    const __m256 mc = _mm256_set1_ps(mx * c);
    __m256 sum0 = _mm256_setzero_ps(), sum1 = _mm256_setzero_ps();
    for (int j = 0; j < NPAD; j += 16) {
        __m256 e0 = exp2_ps(_mm256_fmsub_ps(_mm256_load_ps(s + j), cv, mc));
        __m256 e1 = exp2_ps(_mm256_fmsub_ps(_mm256_load_ps(s + j + 8), cv, mc));
        if (j + 16 > N) {
            e0 = _mm256_and_ps(e0, _mm256_castsi256_ps(lanes(N - j)));
            e1 = _mm256_and_ps(e1, _mm256_castsi256_ps(lanes(N - j - 8)));
        }
        _mm256_store_ps(s + j, e0);
        _mm256_store_ps(s + j + 8, e1);
        sum0 = _mm256_add_ps(sum0, e0);
        sum1 = _mm256_add_ps(sum1, e1);
    }
    return hsum8(_mm256_add_ps(sum0, sum1));
}

/* O = P V for rows [r0, r0 + R6) of the block, scaled by inv[r], into orow[r], one DP-column
 * panel of V at a time. */
static inline void pv(const float *restrict sc, int r0, const float *restrict vp,
                      const float inv[MR], float *const orow[MR]) {
    const float *pr = sc + (size_t)r0 * SCLD;
    for (int dp = 0; dp < DPAN; dp++) {
        const float *vb = vp + (size_t)dp * N * DP;
        __m256 acc[R6][2];
#pragma GCC unroll 8
        for (int r = 0; r < R6; r++) {
            acc[r][0] = _mm256_setzero_ps();
            acc[r][1] = _mm256_setzero_ps();
        }
#pragma GCC unroll 2
        for (int j = 0; j < N; j++) {
            const __m256 w0 = _mm256_load_ps(vb + (size_t)j * DP);
            const __m256 w1 = _mm256_load_ps(vb + (size_t)j * DP + 8);
#pragma GCC unroll 8
            for (int r = 0; r < R6; r++) {
                const __m256 p = _mm256_broadcast_ss(pr + (size_t)r * SCLD + j);
                acc[r][0] = _mm256_fmadd_ps(p, w0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(p, w1, acc[r][1]);
            }
        }
        const int d0 = dp * DP;
        for (int r = 0; r < R6; r++) {
            float *o = orow[r0 + r];
            if (o == NULL) continue;
            const __m256 s = _mm256_set1_ps(inv[r0 + r]);
            const __m256 o0 = _mm256_mul_ps(acc[r][0], s), o1 = _mm256_mul_ps(acc[r][1], s);
            if (D - d0 >= DP) {
                _mm256_storeu_ps(o + d0, o0);
                _mm256_storeu_ps(o + d0 + 8, o1);
            } else {
                _mm256_maskstore_ps(o + d0, lanes(D - d0), o0);
                _mm256_maskstore_ps(o + d0 + 8, lanes(D - d0 - 8), o1);
            }
        }
    }
}

#else
/* ---- portable helpers: GCC vector extensions, 4-wide ---- */
typedef float v4 __attribute__((vector_size(16)));
typedef int v4i __attribute__((vector_size(16)));

static inline v4 splat(float x) { return (v4){x, x, x, x}; }

/* 2^x for x <= 0.5 (x < -126 flushed to 2^-126): 2^n * p(x - n), n = round(x) */
static inline v4 exp2v(v4 x) {
    const v4 lo = splat(-126.0f), magic = splat(12582912.0f); /* 1.5 * 2^23 */
    const v4i m = x < lo;
    x = (v4)(((v4i)x & ~m) | ((v4i)lo & m));
    const v4 n = (x + magic) - magic; /* round to nearest */
    const v4 f = x - n;
    v4 p = splat(P5) * f + splat(P4);
    p = p * f + splat(P3);
    p = p * f + splat(P2);
    p = p * f + splat(P1);
    p = p * f + splat(1.0f);
    const v4i e = (__builtin_convertvector(n, v4i) + 127) << 23;
    return p * (v4)e;
}

/* K^T panels of one (batch, kv head): pk[jp][d][KP] = k[j0 + jj][d], zero for keys >= N. */
static void pack_kt(const float *restrict kb, float *restrict pk) {
    const size_t ks = (size_t)KH * D;
    for (int j = 0; j < NPAD; j++) {
        float *dst = pk + (size_t)(j / KP) * D * KP + (j % KP);
        const float *src = kb + (size_t)j * ks;
        for (int d = 0; d < D; d++) dst[(size_t)d * KP] = j < N ? src[d] : 0.0f;
    }
}

/* S = Q K^T for the MR rows of qb into sc[MR][SCLD]; row maxima over the N valid keys. */
static inline void scores(const float *restrict qb, const float *restrict pk, float *restrict sc,
                          float mx[MR]) {
    for (int r = 0; r < MR; r++) mx[r] = -INFINITY;
    for (int jp = 0; jp < NPAN; jp++) {
        const float *p = pk + (size_t)jp * D * KP;
        const int j0 = jp * KP;
        for (int r0 = 0; r0 < MR; r0 += R6) {
            const float *a = qb + (size_t)r0 * QLD;
            v4 acc[R6][NVK];
#pragma GCC unroll 8
            for (int r = 0; r < R6; r++)
#pragma GCC unroll 4
                for (int c = 0; c < NVK; c++) acc[r][c] = splat(0.0f);
#pragma GCC unroll 2
            for (int d = 0; d < D; d++) {
                v4 b[NVK];
#pragma GCC unroll 4
                for (int c = 0; c < NVK; c++) b[c] = *(const v4 *)(p + (size_t)d * KP + 4 * c);
#pragma GCC unroll 8
                for (int r = 0; r < R6; r++) {
                    const v4 av = splat(a[(size_t)r * QLD + d]);
#pragma GCC unroll 4
                    for (int c = 0; c < NVK; c++) acc[r][c] += av * b[c];
                }
            }
            for (int r = 0; r < R6; r++) {
                float *s = sc + (size_t)(r0 + r) * SCLD + j0;
                for (int c = 0; c < NVK; c++) *(v4 *)(s + 4 * c) = acc[r][c];
                float m = mx[r0 + r];
                for (int jj = 0; jj < KP && j0 + jj < N; jj++) m = s[jj] > m ? s[jj] : m;
                mx[r0 + r] = m;
            }
        }
    }
}

/* Unnormalized softmax weights of one row, in place (keys >= N set to 0); returns their sum. */
static inline float weights(float *restrict s, float mx) {
    const float c = L2E / sqrtf((float)D);
    const v4 cv = splat(c), mc = splat(mx * c);
    v4 sum = splat(0.0f);
    int j = 0;
    for (; j + 4 <= N; j += 4) {
        const v4 e = exp2v(*(const v4 *)(s + j) * cv - mc);
        *(v4 *)(s + j) = e;
        sum += e;
    }
    float tail = 0.0f;
    if (j < N) {
        const v4 e = exp2v(*(const v4 *)(s + j) * cv - mc);
        for (int l = 0; l < 4; l++) {
            const float x = j + l < N ? e[l] : 0.0f;
            s[j + l] = x;
            tail += x;
        }
        j += 4;
    }
    for (; j < NPAD; j++) s[j] = 0.0f;
    return (sum[0] + sum[1]) + (sum[2] + sum[3]) + tail;
}

/* O = P V for rows [r0, r0 + R6) of the block, scaled by inv[r], into orow[r]. */
static inline void pv(const float *restrict sc, int r0, const float *restrict vp,
                      const float inv[MR], float *const orow[MR]) {
    const float *pr = sc + (size_t)r0 * SCLD;
    for (int dp = 0; dp < DPAN; dp++) {
        const float *vb = vp + (size_t)dp * N * DP;
        v4 acc[R6][NVK];
#pragma GCC unroll 8
        for (int r = 0; r < R6; r++)
#pragma GCC unroll 4
            for (int c = 0; c < NVK; c++) acc[r][c] = splat(0.0f);
#pragma GCC unroll 2
        for (int j = 0; j < N; j++) {
            v4 w[NVK];
#pragma GCC unroll 4
            for (int c = 0; c < NVK; c++) w[c] = *(const v4 *)(vb + (size_t)j * DP + 4 * c);
#pragma GCC unroll 8
            for (int r = 0; r < R6; r++) {
                const v4 p = splat(pr[(size_t)r * SCLD + j]);
#pragma GCC unroll 4
                for (int c = 0; c < NVK; c++) acc[r][c] += p * w[c];
            }
        }
        const int d0 = dp * DP, w = D - d0 < DP ? D - d0 : DP;
        for (int r = 0; r < R6; r++) {
            float *o = orow[r0 + r];
            if (o == NULL) continue;
            float t[DP];
            for (int c = 0; c < NVK; c++) memcpy(t + 4 * c, &acc[r][c], sizeof(v4));
            for (int dd = 0; dd < w; dd++) o[d0 + dd] = t[dd] * inv[r0 + r];
        }
    }
}
#endif

void kernel(const float *restrict q, const float *restrict k, const float *restrict v,
            float *restrict out) {
#pragma omp parallel if ((double)B * QH * N * N * D > 1e5)
    {
        const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        const size_t u0 = UNITS * t / nt, u1 = UNITS * (t + 1) / nt;
        float *pk = aligned_alloc(64, sizeof(float) * (size_t)NPAN * D * KP);
        float *pvk = aligned_alloc(64, sizeof(float) * (size_t)DPAN * N * DP);
        float *sc = aligned_alloc(64, sizeof(float) * (size_t)MR * SCLD);
        float *qb = aligned_alloc(64, sizeof(float) * (size_t)MR * QLD);
        long packed = -1;
        if (pk != NULL && sc != NULL && pvk != NULL && qb != NULL) {
            for (size_t u = u0; u < u1; u++) {
                /* unit order: batch, kv head, group member, row block */
                const int rb = (int)(u % RB);
                const size_t bh = u / RB; /* b * QH + h, with h = kvh * G + member */
                const int b = (int)(bh / QH), h = (int)(bh % QH), kvh = h / G;
                const long key = (long)b * KH + kvh;
                if (key != packed) {
                    pack_kt(k + (size_t)b * N * KH * D + (size_t)kvh * D, pk);
                    pack_v(v + (size_t)b * N * KH * D + (size_t)kvh * D, pvk);
                    packed = key;
                }
                const int i0 = rb * MR;
                const int rows = N - i0 < MR ? N - i0 : MR;
                float *orow[MR];
                for (int r = 0; r < MR; r++) {
                    const int i = i0 + (r < rows ? r : rows - 1);
                    memcpy(qb + (size_t)r * QLD, q + (((size_t)b * N + i) * QH + h) * D, sizeof(float) * D);
                    orow[r] = r < rows ? out + (((size_t)b * QH + h) * N + i0 + r) * D : NULL;
                }
                float mx[MR], inv[MR];
                scores(qb, pk, sc, mx);
                for (int r = 0; r < MR; r++) inv[r] = 1.0f / weights(sc + (size_t)r * SCLD, mx[r]);
                for (int r0 = 0; r0 < MR; r0 += R6) pv(sc, r0, pvk, inv, orow);
            }
        }
        free(pk);
        free(pvk);
        free(sc);
        free(qb);
    }
}
#endif
