/* mamba expert: the selective scan, vectorized across channels.
 *
 *   h[ch, s] = exp(delta[ch,i] * a[ch,s]) * h[ch, s] + (delta[ch,i] * u[ch,i]) * b[s,i]
 *   out[ch, i] = sum_s c[s,i] * h[ch, s]
 *
 * The work is M*C*S exponentials. An exp costs ~10 vector instructions here (the cost model counts
 * it as 1 FLOP), so the kernel is compute-bound on a CPU and the design minimizes the vector
 * instructions per (step, channel, state). Three paths, picked by the compiler's target macros,
 * share the method:
 *  - one vector holds a group of channels, so the state h[s] of the group is one vector and no
 *    horizontal sum is ever needed: y += c[s,i] * h[s] is one FMA with c[s,i] broadcast, as is
 *    b[s,i];
 *  - delta/u/out rows move between their [C, M] layout and step-major vectors by transposes, a
 *    block of steps at a time; a[., s] for the group is one vector per state;
 *  - b and c ([S, M], rows 4*M bytes apart, which for M = 7168 all fall in one L1 set) are
 *    first copied step-major into one shared buffer bc[M][2][S] (both threads, then a barrier),
 *    so the 2*S scalars a step needs sit in 2 cache lines;
 *  - exp(t) = 2^x with x = (delta*log2e)*a (one rounding more than t itself: a relative change of
 *    ~1e-7 of the exponent, far below the tolerance); 2^x = 2^n * 2^f with n = round(x), f = x - n
 *    (exact), 2^f by a fitted degree-5 polynomial (<= 1.9e-7 relative), scaled by 2^n;
 *  - range-dependent evaluation with a rigorous bound, decided once per block of steps from
 *    B = max_t |delta*log2e| * max_s |a[ch,s]| over the block and all lanes (|x| <= B(1+2^-23)):
 *      B <= 1/16 (the usual case: the inputs are ~N(0, 0.05^2)): 2^x by its Taylor polynomial of
 *        degree 3 (<= 2.0e-7 relative on |x| <= 1/16, exact to second order at 0, so the per-step
 *        error has no x^2 bias for the recurrence to accumulate), regrouped in powers of
 *        delta*log2e with coefficients Qj * a^j computed once per group: 3 FMAs, no multiply;
 *      B <= 0.49 (vector paths): every n is 0, so f = x exactly and 2^n = 1: the degree-5 path
 *        without round/subtract/scale (bit-identical to the general path);
 *      otherwise the general path above;
 *    with the first tier a (step, channel group, state) costs 6 vector instructions (3 for 2^x,
 *    2 for h, 1 for y) instead of ~12;
 *  - OpenMP over channel groups (static, both cores); a ragged channel group runs with zero lanes
 *    (delta = 0 keeps h = 0) and only its valid rows are stored; a ragged step block stops at M.
 *
 * AVX-512 (__AVX512F__): 16 channels per zmm, blocks of 16 steps (16x16 in-register transposes
 *    of delta, u and out), the S states of h kept in registers for the whole sequence; the
 *    exponentials of IL states computed stage by stage together (independent chains side by side
 *    for the out-of-order window); y split into 4 partial sums; 2^n by vscalefps, which saturates
 *    to 0 / inf, so no clamping is needed; masked loads/stores for the ragged edges.
 * AVX2 + FMA (__AVX2__ && __FMA__): 8 channels per ymm, blocks of TB steps (delta, u and out
 *    through 8x8 in-register transposes; TB derived from the L1d size, 128 for S = 16 and 32 KiB,
 *    so that the block's step-major vectors and b/c scalars stay in L1). The 16 ymm
 *    registers cannot hold S states besides the rest, so each block runs in passes of SQ = 4
 *    states: their h stay in registers over the block's steps (stored between passes), the
 *    exponentials of the 4 states are computed stage by stage together, and each pass adds its
 *    part of y into the block's step-major y (the long block makes the passes' overhead small);
 *    2^n built in the exponent bits with integer ops (n from the round-by-adding 1.5*2^23 trick,
 *    shifted left by 23, plus the bias), x first clamped to [-126, 128] (2^128 is the bits of
 *    +inf; below -126 the decay is 1e-38 instead of 0); vmaskmovps for a ragged step block.
 * Portable (everything else, e.g. SSE-only x86 or aarch64): the same scan in plain C over groups
 *    of 8 channels and blocks of 16 steps, each (step, state) an inner loop over the 8 channels
 *    that the compiler vectorizes (#pragma omp simd) for SSE / NEON / SVE; the Taylor tier and
 *    the general path (x clamped on the float's bits with integer mins, so that the loop
 *    if-converts); the transposes are copies through small step-major buffers; no intrinsics.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BCS (2 * S) /* floats per step in the packed b/c buffer */

/* Machine-dependent parameters (the vector widths and register blocking follow the ISA):
 * ACCELOPT_L1D_BYTES, the per-core L1d size the build defines (from sysfs; a cross build leaves
 * it undefined: then 32 KiB), sets the AVX2 path's step block (TBLK, there).
 * PFDIST: how many steps (floats) ahead the vector paths prefetch the rows of delta and u (a
 * channel group reads 2*CG rows at once, M floats apart: more streams than the hardware
 * prefetchers can be relied on to track); 64 = 4 AVX-512 blocks or 8 AVX2 octets ahead. */
#ifndef ACCELOPT_L1D_BYTES
#define ACCELOPT_L1D_BYTES 32768
#endif
#ifndef PFDIST
#define PFDIST 64 /* tune: 32 64 128 256 */
#endif

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

#if defined(__AVX512F__)

#define CG 16 /* channels per group: the lanes of one zmm */
#define GROUPS ((C + CG - 1) / CG)
#ifndef IL
#define IL 4 /* tune: 2 4 8 */ /* states whose exponentials are computed stage by stage together */
#endif

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
                        if (i0 + PFDIST < M) {
                            _mm_prefetch((const char *)(delta + row + PFDIST), _MM_HINT_T0);
                            _mm_prefetch((const char *)(u + row + PFDIST), _MM_HINT_T0);
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

#elif defined(__AVX2__) && defined(__FMA__)

#define CG 8 /* channels per group: the lanes of one ymm */
#define GROUPS ((C + CG - 1) / CG)
/* Steps per block (TBLK; 0 = derived from ACCELOPT_L1D_BYTES): long, so that the passes (h
 * stored and reloaded, the R of the next states) cost little, but short enough that the block's
 * working set, re-read by each of the S/SQ passes, stays in L1d: per step its dl, du and y (3 ymm,
 * 96 bytes) and its b/c scalars (2*S floats, 2 cache lines for S = 16).  Derived, the most
 * multiples of 8 steps whose working set fills at most 7/8 of L1d (the rest for h, aT, R and the
 * rows of delta/u coming in): 128 for S = 16 and a 32 KiB L1d, 192 for 48 KiB.  Given, a
 * multiple of 8 (8x8 transposes). */
#ifndef TBLK
#define TBLK 0 /* tune: 0 64 128 192 256 */
#endif
#if TBLK > 0
#define TB TBLK
#else
#define TB_L1 (ACCELOPT_L1D_BYTES * 7 / 8 / (3 * 32 + 2 * S * 4) / 8 * 8)
#define TB (TB_L1 > 8 ? TB_L1 : 8)
#endif
#define SQ 4 /* states per pass: their h stay in registers over a block */

/* In-place transpose of 8 vectors (rows) of 8 floats. */
static inline void transpose8(__m256 r[8]) {
    __m256 t[8], q[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        q[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        q[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        q[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        q[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2f128_ps(q[k], q[4 + k], 0x20);
        r[k + 4] = _mm256_permute2f128_ps(q[k], q[4 + k], 0x31);
    }
}

/* One pass over the nst steps of a block for the states s0 .. s0+SQ-1 of a group of 8 channels:
 * h[s] in registers, y[t] += sum over the pass's states (y[t] starts at 0 in the first pass).
 * mode 2: the Taylor tier, 1: every |x| < 1/2 (n = 0), 0: general (see the header). */
static inline __attribute__((always_inline)) void
scan_pass(__m256 *restrict hs, const __m256 *restrict aT, const __m256 *restrict R,
          const __m256 *restrict dlT, const __m256 *restrict duT, const float *restrict bcb,
          __m256 *restrict yT, const int nst, const int s0, const int mode) {
    __m256 h[SQ];
#pragma GCC unroll 16
    for (int k = 0; k < SQ; k++)
        if (s0 + k < S) h[k] = hs[s0 + k];
    for (int t = 0; t < nst; t++) {
        const __m256 dl = dlT[t], du = duT[t];
        const float *restrict bci = bcb + (size_t)t * BCS;
        __m256 f[SQ], kn[SQ], p[SQ];
        if (mode == 2) {
            /* p = 1 + dl*(R1 + dl*(R2 + dl*R3)), Rj = Qj * a^j: the Taylor polynomial in x = dl*a
             * regrouped in powers of dl (no multiply for x) */
#pragma GCC unroll 16
            for (int k = 0; k < SQ; k++)
                if (s0 + k < S) p[k] = _mm256_fmadd_ps(R[3 * (s0 + k) + 2], dl, R[3 * (s0 + k) + 1]);
#pragma GCC unroll 16
            for (int k = 0; k < SQ; k++)
                if (s0 + k < S) p[k] = _mm256_fmadd_ps(p[k], dl, R[3 * (s0 + k)]);
#pragma GCC unroll 16
            for (int k = 0; k < SQ; k++)
                if (s0 + k < S) p[k] = _mm256_fmadd_ps(p[k], dl, _mm256_set1_ps(1.0f));
        } else {
#pragma GCC unroll 16
            for (int k = 0; k < SQ; k++)
                if (s0 + k < S) f[k] = _mm256_mul_ps(dl, aT[s0 + k]);
            if (mode == 0) {
                const __m256 magic = _mm256_set1_ps(12582912.0f); /* 1.5 * 2^23 */
#pragma GCC unroll 16
                for (int k = 0; k < SQ; k++)
                    if (s0 + k < S) {
                        /* n in [-126, 128]: 2^n a normal float, or the bits of +inf */
                        f[k] = _mm256_min_ps(_mm256_max_ps(f[k], _mm256_set1_ps(-126.0f)),
                                             _mm256_set1_ps(128.0f));
                        kn[k] = _mm256_add_ps(f[k], magic);
                        f[k] = _mm256_sub_ps(f[k], _mm256_sub_ps(kn[k], magic));
                    }
            }
#pragma GCC unroll 16
            for (int k = 0; k < SQ; k++)
                if (s0 + k < S) p[k] = _mm256_fmadd_ps(_mm256_set1_ps(P5), f[k], _mm256_set1_ps(P4));
#pragma GCC unroll 16
            for (int k = 0; k < SQ; k++)
                if (s0 + k < S) p[k] = _mm256_fmadd_ps(p[k], f[k], _mm256_set1_ps(P3));
#pragma GCC unroll 16
            for (int k = 0; k < SQ; k++)
                if (s0 + k < S) p[k] = _mm256_fmadd_ps(p[k], f[k], _mm256_set1_ps(P2));
#pragma GCC unroll 16
            for (int k = 0; k < SQ; k++)
                if (s0 + k < S) p[k] = _mm256_fmadd_ps(p[k], f[k], _mm256_set1_ps(P1));
#pragma GCC unroll 16
            for (int k = 0; k < SQ; k++)
                if (s0 + k < S) p[k] = _mm256_fmadd_ps(p[k], f[k], _mm256_set1_ps(1.0f));
            if (mode == 0) {
#pragma GCC unroll 16
                for (int k = 0; k < SQ; k++)
                    if (s0 + k < S) {
                        /* the low bits of kn hold n: n << 23 plus the bias is 2^n */
                        const __m256i e = _mm256_add_epi32(
                            _mm256_slli_epi32(_mm256_castps_si256(kn[k]), 23),
                            _mm256_set1_epi32(127 << 23));
                        p[k] = _mm256_mul_ps(p[k], _mm256_castsi256_ps(e));
                    }
            }
        }
        __m256 y0 = s0 == 0 ? _mm256_setzero_ps() : yT[t], y1 = _mm256_setzero_ps();
#pragma GCC unroll 16
        for (int k = 0; k < SQ; k++)
            if (s0 + k < S) {
                const int st = s0 + k;
                h[k] = _mm256_fmadd_ps(p[k], h[k], _mm256_mul_ps(du, _mm256_broadcast_ss(bci + st)));
                if (k & 1)
                    y1 = _mm256_fmadd_ps(_mm256_broadcast_ss(bci + S + st), h[k], y1);
                else
                    y0 = _mm256_fmadd_ps(_mm256_broadcast_ss(bci + S + st), h[k], y0);
            }
        yT[t] = _mm256_add_ps(y0, y1);
    }
#pragma GCC unroll 16
    for (int k = 0; k < SQ; k++)
        if (s0 + k < S) hs[s0 + k] = h[k];
}

/* All passes of one block of steps (mode fixed). */
static inline __attribute__((always_inline)) void
scan_block(__m256 *restrict h, const __m256 *restrict aT, const __m256 *restrict R,
           const __m256 *restrict dlT, const __m256 *restrict duT, const float *restrict bcb,
           __m256 *restrict yT, const int nst, const int mode) {
#pragma GCC unroll 16
    for (int s0 = 0; s0 < S; s0 += SQ) scan_pass(h, aT, R, dlT, duT, bcb, yT, nst, s0, mode);
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
            const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);

            __m256 aT[S], h[S], R[3 * S];
            __m256 amax = _mm256_setzero_ps();
            const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
            for (int s = 0; s < S; s++) {
                float col[CG];
                for (int l = 0; l < CG; l++) col[l] = l < nch ? a[(size_t)(ch0 + l) * S + s] : 0.0f;
                aT[s] = _mm256_loadu_ps(col);
                amax = _mm256_max_ps(amax, _mm256_and_ps(aT[s], absmask));
                const __m256 a2 = _mm256_mul_ps(aT[s], aT[s]);
                R[3 * s] = _mm256_mul_ps(_mm256_set1_ps(Q1), aT[s]);
                R[3 * s + 1] = _mm256_mul_ps(_mm256_set1_ps(Q2), a2);
                R[3 * s + 2] = _mm256_mul_ps(_mm256_set1_ps(Q3), _mm256_mul_ps(a2, aT[s]));
                h[s] = _mm256_setzero_ps();
            }

            for (int i0 = 0; i0 < M; i0 += TB) {
                const int nst = M - i0 < TB ? M - i0 : TB;
                __m256 dlT[TB], duT[TB], yT[TB];
                __m256 dmax = _mm256_setzero_ps();
                for (int q = 0; q < TB / 8; q++) { /* 8 steps at a time: one 8x8 transpose */
                    const int left = nst - 8 * q; /* valid steps in this octet (may be <= 0) */
                    const __m256i smask = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane);
                    __m256 dT[8], uT[8];
                    for (int l = 0; l < CG; l++) {
                        if (l < nch && left > 0) {
                            const size_t row = (size_t)(ch0 + l) * M + (size_t)(i0 + 8 * q);
                            if (left >= 8) {
                                dT[l] = _mm256_loadu_ps(delta + row);
                                uT[l] = _mm256_loadu_ps(u + row);
                            } else {
                                dT[l] = _mm256_maskload_ps(delta + row, smask);
                                uT[l] = _mm256_maskload_ps(u + row, smask);
                            }
                            if (i0 + 8 * q + PFDIST < M) {
                                _mm_prefetch((const char *)(delta + row + PFDIST), _MM_HINT_T0);
                                _mm_prefetch((const char *)(u + row + PFDIST), _MM_HINT_T0);
                            }
                        } else {
                            dT[l] = _mm256_setzero_ps();
                            uT[l] = _mm256_setzero_ps();
                        }
                    }
                    transpose8(dT);
                    transpose8(uT);
                    for (int t = 0; t < 8; t++) {
                        dlT[8 * q + t] = _mm256_mul_ps(dT[t], _mm256_set1_ps(1.44269504088896341f));
                        duT[8 * q + t] = _mm256_mul_ps(dT[t], uT[t]);
                        dmax = _mm256_max_ps(dmax, _mm256_and_ps(dlT[8 * q + t], absmask));
                    }
                }
                const __m256 bound = _mm256_mul_ps(dmax, amax);
                const float *bcb = bc + (size_t)i0 * BCS;
                if (_mm256_movemask_ps(_mm256_cmp_ps(bound, _mm256_set1_ps(0.0624f), _CMP_LE_OQ)) == 0xFF)
                    scan_block(h, aT, R, dlT, duT, bcb, yT, nst, 2);
                else if (_mm256_movemask_ps(_mm256_cmp_ps(bound, _mm256_set1_ps(0.49f), _CMP_LE_OQ)) == 0xFF)
                    scan_block(h, aT, R, dlT, duT, bcb, yT, nst, 1);
                else
                    scan_block(h, aT, R, dlT, duT, bcb, yT, nst, 0);
                for (int q = 0; q < TB / 8; q++) {
                    const int left = nst - 8 * q;
                    if (left <= 0) break;
                    const __m256i smask = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane);
                    __m256 y8[8];
                    for (int t = 0; t < 8; t++) y8[t] = t < left ? yT[8 * q + t] : _mm256_setzero_ps();
                    transpose8(y8);
                    for (int l = 0; l < nch; l++) {
                        float *dst = out + (size_t)(ch0 + l) * M + (size_t)(i0 + 8 * q);
                        if (left >= 8)
                            _mm256_storeu_ps(dst, y8[l]);
                        else
                            _mm256_maskstore_ps(dst, smask, y8[l]);
                    }
                }
            }
        }
    }
    free(bc);
}

#else /* portable: plain C that the compiler vectorizes, no intrinsics */

#define CG 8 /* channels per group: the inner, vectorized dimension */
#define GROUPS ((C + CG - 1) / CG)
#define TB 16 /* steps per block */

/* 2^x for any x: clamped to [-126, 128] on the bits with integer min (unsigned, the floats
 * <= -126 are the patterns above bits(-126); signed, the floats >= 128 the patterns above
 * bits(128)), so that a loop over it if-converts; then the path of the header, 2^128 being the
 * bits of +inf. */
static inline float exp2_general(float x) {
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    xb = xb < 0xC2FC0000u ? xb : 0xC2FC0000u;                          /* bits(-126.0f) */
    const int32_t xs = (int32_t)xb < 0x43000000 ? (int32_t)xb : 0x43000000; /* bits(128.0f) */
    memcpy(&x, &xs, sizeof x);
    const float kn = x + 12582912.0f; /* + 1.5 * 2^23 rounds to integer */
    const float f = x - (kn - 12582912.0f);
    float p = P5 * f + P4;
    p = p * f + P3;
    p = p * f + P2;
    p = p * f + P1;
    p = p * f + 1.0f;
    uint32_t bits;
    memcpy(&bits, &kn, sizeof bits);
    bits = (bits << 23) + (127u << 23); /* the low bits of kn hold n: n << 23 plus the bias */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* The nst steps of a block for one group: h[S][CG] and y[TB][CG] (mode 2: the Taylor tier, 0:
 * general). */
static inline __attribute__((always_inline)) void
scan_block(float (*restrict h)[CG], const float (*restrict aT)[CG], const float (*restrict R)[CG],
           const float (*restrict dl)[CG], const float (*restrict du)[CG], const float *restrict bcb,
           float (*restrict y)[CG], const int nst, const int mode) {
    for (int t = 0; t < nst; t++) {
        const float *restrict bci = bcb + (size_t)t * BCS;
        float yv[CG] = {0};
        for (int s = 0; s < S; s++) {
            const float bs = bci[s], cs = bci[S + s];
#pragma omp simd
            for (int l = 0; l < CG; l++) {
                const float d = dl[t][l];
                const float e = mode == 2
                                    ? 1.0f + d * (R[3 * s][l] + d * (R[3 * s + 1][l] + d * R[3 * s + 2][l]))
                                    : exp2_general(d * aT[s][l]);
                h[s][l] = e * h[s][l] + du[t][l] * bs;
                yv[l] += cs * h[s][l];
            }
        }
        for (int l = 0; l < CG; l++) y[t][l] = yv[l];
    }
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
            float aT[S][CG], R[3 * S][CG], h[S][CG];
            float amax = 0.0f;
            for (int s = 0; s < S; s++)
                for (int l = 0; l < CG; l++) {
                    const float av = l < nch ? a[(size_t)(ch0 + l) * S + s] : 0.0f;
                    const float aa = av < 0.0f ? -av : av;
                    amax = aa > amax ? aa : amax;
                    aT[s][l] = av;
                    R[3 * s][l] = Q1 * av;
                    R[3 * s + 1][l] = Q2 * (av * av);
                    R[3 * s + 2][l] = Q3 * ((av * av) * av);
                    h[s][l] = 0.0f;
                }
            for (int i0 = 0; i0 < M; i0 += TB) {
                const int nst = M - i0 < TB ? M - i0 : TB;
                float dl[TB][CG], du[TB][CG], y[TB][CG];
                float dmax = 0.0f;
                for (int l = 0; l < CG; l++)
                    for (int t = 0; t < TB; t++) {
                        const size_t at = (size_t)(ch0 + l) * M + (size_t)(i0 + t);
                        const float d = l < nch && t < nst ? delta[at] : 0.0f;
                        const float uv = l < nch && t < nst ? u[at] : 0.0f;
                        dl[t][l] = d * 1.44269504088896341f;
                        du[t][l] = d * uv;
                        const float ad = dl[t][l] < 0.0f ? -dl[t][l] : dl[t][l];
                        dmax = ad > dmax ? ad : dmax;
                    }
                const float *bcb = bc + (size_t)i0 * BCS;
                if (dmax * amax <= 0.0624f)
                    scan_block(h, aT, R, dl, du, bcb, y, nst, 2);
                else
                    scan_block(h, aT, R, dl, du, bcb, y, nst, 0);
                for (int l = 0; l < nch; l++)
                    for (int t = 0; t < nst; t++) out[(size_t)(ch0 + l) * M + (size_t)(i0 + t)] = y[t][l];
            }
        }
    }
    free(bc);
}

#endif
