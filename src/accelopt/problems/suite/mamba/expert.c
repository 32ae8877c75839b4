/* mamba expert: the selective scan, vectorized across channels.
 *
 *   h[ch, s] = exp(delta[ch,i] * a[ch,s]) * h[ch, s] + (delta[ch,i] * u[ch,i]) * b[s,i]
 *   out[ch, i] = sum_s c[s,i] * h[ch, s]
 *
 * The work is M*C*S exponentials. An exp costs ~10 vector instructions here (the cost model counts
 * it as 1 FLOP), so the kernel is compute-bound on a CPU and the design minimizes the vector
 * instructions per (step, channel, state):
 *  - one zmm holds 16 channels, so the state h[s] of 16 channels is one register, S registers in
 *    all, kept in registers for the whole sequence, and no horizontal sum is ever needed:
 *    y += c[s,i] * h[s] is one FMA with c[s,i] broadcast from memory, as is b[s,i];
 *  - delta/u/out rows move between their [C, M] layout and step-major vectors by 16x16
 *    in-register transposes, 16 steps at a time; a[., s] for the group is one vector per state;
 *  - b and c ([S, M], rows 4*M bytes apart, which for M = 7168 all fall in one L1 set) are
 *    first copied step-major into one shared buffer bc[M][2][S] (both threads, then a barrier),
 *    so the 2*S scalars a step needs sit in 2 cache lines;
 *  - exp(t) = 2^x with x = (delta*log2e)*a (one rounding more than t itself: a relative change of
 *    ~1e-7 of the exponent, far below the tolerance); 2^x = 2^n * 2^f with n = round(x), f = x - n
 *    (exact), 2^f by a fitted degree-5 polynomial (<= 1.9e-7 relative), vscalefps by n (which
 *    saturates to 0 / inf, so no clamping is needed);
 *  - range-dependent evaluation with a rigorous bound, decided once per block of 16 steps from
 *    B = max_t |delta*log2e| * max_s |a[ch,s]| over the block and all 16 lanes (|x| <= B(1+2^-23)):
 *      B <= 1/16 (the usual case: the inputs are ~N(0, 0.05^2)): 2^x by its Taylor polynomial of
 *        degree 3 (<= 2.0e-7 relative on |x| <= 1/16, exact to second order at 0, so the per-step
 *        error has no x^2 bias for the recurrence to accumulate), regrouped in powers of
 *        delta*log2e with coefficients Qj * a^j computed once per group: 3 FMAs, no multiply;
 *      B <= 0.49: every n is 0, so f = x exactly and vscalefps(p, 0) = p: the degree-5 path
 *        without round/subtract/scalef (bit-identical to the general path);
 *      otherwise the general path above;
 *    with the first tier a (step, 16 channels, state) costs 6 vector instructions (3 for 2^x,
 *    2 for h, 1 for y) instead of ~12;
 *  - the exponentials of IL states are computed stage by stage together (independent chains
 *    side by side for the out-of-order window); y is split into 4 partial sums;
 *  - OpenMP over groups of 16 channels (static, both cores); a ragged channel group runs with zero
 *    lanes (delta = 0 keeps h = 0) and masked stores; a ragged step block with masked loads.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>

#define CG 16 /* channels per group: the lanes of one zmm */
#define GROUPS ((C + CG - 1) / CG)
#define IL 4 /* states whose exponentials are computed stage by stage together */
#define BCS (2 * S) /* floats per step in the packed b/c buffer */

#define P5 1.326472731307149e-3f
#define P4 9.671512991189957e-3f
#define P3 5.550733581185341e-2f
#define P2 2.4022242426872253e-1f
#define P1 6.931470036506653e-1f
/* 2^x on |x| <= 1/16: the Taylor polynomial of degree 3 (<= 2.0e-7 relative; exact to second
 * order at 0, so the per-step error has no x^2 bias for the recurrence to accumulate) */
#define Q3 5.550410971045494e-2f
#define Q2 2.4022650718688965e-1f
#define Q1 6.931471824645996e-1f

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
    /* r[4i + k] now holds, in each 128-bit lane L, element 4L + k of rows 4i..4i+3 */
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

/* One step for the 16 channels of a group: updates h[0..S-1], returns y (16 channels).
 * FAST: every |x| < 1/2 is guaranteed, so n = 0 (see the header). */
static inline __attribute__((always_inline)) __m512
scan_step(__m512 *restrict h, const __m512 *restrict aT, const __m512 *restrict R, __m512 dl, __m512 du,
          const float *restrict bci, const int mode) {
    const int fast = mode != 0;
    __m512 y4[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                    _mm512_setzero_ps()};
#pragma GCC unroll 64
    for (int s0 = 0; s0 < S; s0 += IL) {
        __m512 f[IL], n[IL], p[IL];
#pragma GCC unroll 16
        for (int k = 0; k < IL; k++)
            if (s0 + k < S && mode != 2) f[k] = _mm512_mul_ps(dl, aT[s0 + k]);
        if (!fast) {
#pragma GCC unroll 16
            for (int k = 0; k < IL; k++)
                if (s0 + k < S) {
                    n[k] = _mm512_roundscale_ps(f[k], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                    f[k] = _mm512_sub_ps(f[k], n[k]);
                }
        }
        if (mode == 2) {
            /* p = 1 + dl*(R1 + dl*(R2 + dl*R3)), Rj = Qj * a^j: the Taylor polynomial in x = dl*a
             * regrouped in powers of dl (no multiply for x) */
#pragma GCC unroll 16
            for (int k = 0; k < IL; k++)
                if (s0 + k < S) p[k] = _mm512_fmadd_ps(R[3 * (s0 + k) + 2], dl, R[3 * (s0 + k) + 1]);
#pragma GCC unroll 16
            for (int k = 0; k < IL; k++)
                if (s0 + k < S) p[k] = _mm512_fmadd_ps(p[k], dl, R[3 * (s0 + k)]);
            for (int k = 0; k < IL; k++) f[k] = dl;
        } else {
#pragma GCC unroll 16
            for (int k = 0; k < IL; k++)
                if (s0 + k < S) p[k] = _mm512_fmadd_ps(_mm512_set1_ps(P5), f[k], _mm512_set1_ps(P4));
#pragma GCC unroll 16
            for (int k = 0; k < IL; k++)
                if (s0 + k < S) p[k] = _mm512_fmadd_ps(p[k], f[k], _mm512_set1_ps(P3));
#pragma GCC unroll 16
            for (int k = 0; k < IL; k++)
                if (s0 + k < S) p[k] = _mm512_fmadd_ps(p[k], f[k], _mm512_set1_ps(P2));
#pragma GCC unroll 16
            for (int k = 0; k < IL; k++)
                if (s0 + k < S) p[k] = _mm512_fmadd_ps(p[k], f[k], _mm512_set1_ps(P1));
        }
#pragma GCC unroll 16
        for (int k = 0; k < IL; k++)
            if (s0 + k < S) p[k] = _mm512_fmadd_ps(p[k], f[k], _mm512_set1_ps(1.0f));
#pragma GCC unroll 16
        for (int k = 0; k < IL; k++)
            if (s0 + k < S) {
                const int st = s0 + k;
                const __m512 e = fast ? p[k] : _mm512_scalef_ps(p[k], n[k]);
                h[st] = _mm512_fmadd_ps(e, h[st], _mm512_mul_ps(du, _mm512_set1_ps(bci[st])));
                y4[st & 3] = _mm512_fmadd_ps(_mm512_set1_ps(bci[S + st]), h[st], y4[st & 3]);
            }
    }
    return _mm512_add_ps(_mm512_add_ps(y4[0], y4[1]), _mm512_add_ps(y4[2], y4[3]));
}

void kernel(const float *restrict delta, const float *restrict u, const float *restrict a,
            const float *restrict b, const float *restrict c, float *restrict out) {
    float *bc = malloc(sizeof(float) * BCS * (size_t)M);
    if (bc == NULL) return;
#pragma omp parallel if (GROUPS > 1)
    {
#pragma omp for schedule(static)
        for (int i = 0; i < M; i++)
            for (int s = 0; s < S; s++) {
                bc[(size_t)i * BCS + s] = b[(size_t)s * M + i];
                bc[(size_t)i * BCS + S + s] = c[(size_t)s * M + i];
            }
        /* implicit barrier: bc is complete */
#pragma omp for schedule(static)
        for (int g = 0; g < GROUPS; g++) {
            const int ch0 = g * CG;
            const int nch = C - ch0 < CG ? C - ch0 : CG;
            const __mmask16 cmask = (__mmask16)((1u << nch) - 1u);
            const __m512i lane =
                _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);

            __m512 aT[S], h[S], R[3 * S];
            __m512 amax = _mm512_setzero_ps();
            for (int s = 0; s < S; s++) {
                const __m512i idx = _mm512_add_epi32(
                    _mm512_mullo_epi32(lane, _mm512_set1_epi32(S)), _mm512_set1_epi32(s));
                aT[s] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), cmask, idx,
                                                 a + (size_t)ch0 * S, 4);
                amax = _mm512_max_ps(amax, _mm512_abs_ps(aT[s]));
                const __m512 a2 = _mm512_mul_ps(aT[s], aT[s]);
                R[3 * s] = _mm512_mul_ps(_mm512_set1_ps(Q1), aT[s]);
                R[3 * s + 1] = _mm512_mul_ps(_mm512_set1_ps(Q2), a2);
                R[3 * s + 2] = _mm512_mul_ps(_mm512_set1_ps(Q3), _mm512_mul_ps(a2, aT[s]));
                h[s] = _mm512_setzero_ps();
            }

            for (int i0 = 0; i0 < M; i0 += 16) {
                const int nst = M - i0 < 16 ? M - i0 : 16;
                const __mmask16 smask = (__mmask16)((1u << nst) - 1u);
                __m512 dT[16], uT[16], yT[16];
                for (int l = 0; l < 16; l++) {
                    if (l < nch) {
                        const size_t row = (size_t)(ch0 + l) * M + (size_t)i0;
                        dT[l] = _mm512_maskz_loadu_ps(smask, delta + row);
                        uT[l] = _mm512_maskz_loadu_ps(smask, u + row);
                        if (i0 + 64 < M) {
                            _mm_prefetch((const char *)(delta + row + 64), _MM_HINT_T0);
                            _mm_prefetch((const char *)(u + row + 64), _MM_HINT_T0);
                        }
                    } else {
                        dT[l] = _mm512_setzero_ps();
                        uT[l] = _mm512_setzero_ps();
                    }
                }
                transpose16(dT);
                transpose16(uT);
                __m512 dlT[16], duT[16];
                __m512 dmax = _mm512_setzero_ps();
                for (int t = 0; t < 16; t++) {
                    dlT[t] = _mm512_mul_ps(dT[t], _mm512_set1_ps(1.44269504088896341f));
                    duT[t] = _mm512_mul_ps(dT[t], uT[t]);
                    dmax = _mm512_max_ps(dmax, _mm512_abs_ps(dlT[t]));
                }
                const __m512 bound = _mm512_mul_ps(dmax, amax);
                const float *bcb = bc + (size_t)i0 * BCS;
                if (_mm512_cmp_ps_mask(bound, _mm512_set1_ps(0.0624f), _CMP_LE_OQ) == 0xFFFF) {
                    for (int t = 0; t < nst; t++)
                        yT[t] = scan_step(h, aT, R, dlT[t], duT[t], bcb + (size_t)t * BCS, 2);
                } else if (_mm512_cmp_ps_mask(bound, _mm512_set1_ps(0.49f), _CMP_LE_OQ) == 0xFFFF) {
                    for (int t = 0; t < nst; t++)
                        yT[t] = scan_step(h, aT, R, dlT[t], duT[t], bcb + (size_t)t * BCS, 1);
                } else {
                    for (int t = 0; t < nst; t++)
                        yT[t] = scan_step(h, aT, R, dlT[t], duT[t], bcb + (size_t)t * BCS, 0);
                }
                for (int t = nst; t < 16; t++) yT[t] = _mm512_setzero_ps();
                transpose16(yT);
                for (int l = 0; l < nch; l++)
                    _mm512_mask_storeu_ps(out + (size_t)(ch0 + l) * M + (size_t)i0, smask, yT[l]);
            }
        }
    }
    free(bc);
}
