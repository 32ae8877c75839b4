/* bmm_softmax expert: out[b] = softmax(lhs[b] @ rhs[b]) over the last axis.
 *
 * Compute-bound (2*K FLOPs of matmul per output element against 4 bytes written), so the design is
 * a register-blocked GEMM with the softmax fused behind it, so that the scores never touch DRAM.
 * Three paths, picked by the compiler's target macros, with one structure (MR x NR micro-tiles):
 *  - work unit: a block of MR rows of one batch; the units are split statically over both cores;
 *  - rhs[b] ([K, N], row stride 4*N bytes, which maps all K rows of a column panel to a few L1
 *    sets) is packed per thread, when the thread reaches a new batch, into NR-column panels
 *    [N/NR][K][NR] (zero-padded), read sequentially from L1/L2;
 *  - micro-kernel: MR x NR scores in registers, one FMA per (row, vector of columns, k) with
 *    lhs[i, k] broadcast from memory; each finished tile goes to an L2-resident scratch block
 *    (MR rows x N);
 *  - softmax per row from the scratch: x = s*log2e - max*log2e (one FMA; the rounding of
 *    max*log2e is common to the row and cancels in the normalization), 2^x = 2^n * p(f) with
 *    n = round(x), f = x - n exact, a fitted degree-5 polynomial (<= 1.9e-7 relative), written
 *    back to scratch and summed; then one pass multiplies by 1/sum and writes the row;
 *  - ragged edges: a last row block shorter than MR recomputes its last valid row in the unused
 *    accumulator rows (results discarded); N not a multiple of NR uses the zero-padded panel, and
 *    the padded columns are kept out of the maxima, the sums and the output.
 *
 * AVX-512 (__AVX512F__): MR = 12, NR = 32 (2 zmm): 24 zmm accumulators, 8 KiB per panel for
 *    K = 64; running row maxima updated per tile (masked over the last columns); 2^n by vscalefps
 *    (underflow goes to 0 as it should); the row is written with non-temporal stores where out
 *    is larger than L2 (NT_STORES; aligned by a masked head when it does not start on 64 bytes),
 *    an sfence at the end; masked loads/stores over the last columns.
 * AVX2 + FMA (__AVX2__ && __FMA__): MR = 6, NR = 16 (2 ymm): 12 accumulators + 2 rhs vectors +
 *    1 broadcast fill the 16 ymm registers; 4 KiB per panel; running row maxima per tile (blended
 *    over the last columns); x clamped at -126, n rounded by adding 1.5*2^23 + 127, whose low bits
 *    then hold n + 127: shifted left by 23 they are the float 2^n; the exponential pass takes one
 *    vector per iteration so that its constants stay in registers; the padded lanes of the last
 *    vector are masked out of the sum; 32-byte aligned non-temporal stores (where out is larger
 *    than L2, NT_STORES) after a vmaskmovps head, a vmaskmovps tail, an sfence at the end.
 * Portable (everything else, e.g. SSE-only x86 or aarch64): MR = 4, NR = 8 on GCC vector
 *    extensions (two 4-float vectors per row: 8 accumulators, which fit the 16 registers of SSE
 *    as well as NEON's 32); the row maxima, the exponentials (the same 2^x in plain C, the clamp
 *    at -126 on the float's bits with an integer min so that the loop if-converts) and the
 *    normalization are per-element loops over the N valid columns that the compiler vectorizes
 *    (#pragma omp simd, with max / + reductions); ordinary stores; no intrinsics.
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

#if defined(__AVX512F__)
#define MR 12 /* rows per micro-tile */
#define NR 32 /* columns per micro-tile: 2 zmm */
#elif defined(__AVX2__) && defined(__FMA__)
#define MR 6  /* rows per micro-tile */
#define NR 16 /* columns per micro-tile: 2 ymm */
#else
#define MR 4 /* rows per micro-tile */
#define NR 8 /* columns per micro-tile: 2 vectors of 4 floats */
#endif
/* The machine-dependent parameter.  Nothing here is blocked for a cache size: a thread's packed
 * rhs[b] (K x NPAD floats, 320 KiB at the cpu workload) and its scratch block (MR x NPAD) are meant
 * to stay in L2 while the row blocks of batch b stream past them, and the MR x K strip of lhs in
 * L1 (K is 64 at every workload); MR and NR are register tiles, set by the ISA.
 * NT_STORES (vector paths), how out is written: 1, ordinary stores; 2, non-temporal stores, which
 * skip the read for ownership and leave the caches to rhs and the scratch, worth it where out is
 * not read again while it would still be cached; 0 = derived from the cache size: non-temporal
 * when out (B*M*N floats; 32 MiB at the cpu workload) is larger than the per-core L2
 * (ACCELOPT_L2_BYTES, defined by the build from sysfs; 1 MiB when undefined), ordinary below. */
#ifndef ACCELOPT_L2_BYTES
#define ACCELOPT_L2_BYTES 1048576
#endif
#ifndef NT_STORES
#define NT_STORES 0 /* tune: 0 1 2 */
#endif
#if NT_STORES == 0
#define NT_OUT (B * M * N * 4 > ACCELOPT_L2_BYTES)
#else
#define NT_OUT (NT_STORES == 2)
#endif

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

#if defined(__AVX512F__)

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

/* 16 floats of out at dst (64-byte aligned): streamed past the caches (NT_OUT) or stored */
static inline void store_out(float *dst, __m512 v) {
#if NT_OUT
    _mm512_stream_ps(dst, v);
#else
    _mm512_store_ps(dst, v);
#endif
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
        store_out(dst + j, _mm512_mul_ps(_mm512_loadu_ps(s + j), inv));
    if (j < N) {
        const __mmask16 m = tail_mask(N - j);
        _mm512_mask_storeu_ps(dst + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), inv));
    }
}

/* The rows of one unit: scores of its MR rows, then the softmax of its first `rows` rows, which
 * are rows row0, row0 + 1, ... of out viewed as [B*M, N]. */
static inline void unit_rows(const float *const l[MR], const float *restrict pk,
                             float *restrict sc, int rows, float *restrict out, size_t row0) {
    __m512 vmax[MR];
    scores_block(l, pk, sc, vmax);
    for (int r = 0; r < rows; r++)
        softmax_row(sc + (size_t)r * NPAD, vmax[r], out + (row0 + (size_t)r) * N);
}

static inline void end_stores(void) {
    if (NT_OUT) _mm_sfence(); /* the non-temporal stores are weakly ordered */
}

#elif defined(__AVX2__) && defined(__FMA__)

/* 2^x for x <= ~0 (the valid lanes here; padded lanes may hold anything and are discarded):
 * x < -126 is clamped to -126, whose 2^x is a negligible 1.2e-38 next to the row's maximum term 1;
 * n = round(x) by adding 1.5*2^23 + 127, whose low bits then hold n + 127: shifted left by 23
 * they are the float 2^n. 10 constants in all, so that they stay in registers in the loop below. */
static inline __m256 exp2_ps(__m256 x) {
    const __m256 magic = _mm256_set1_ps(12583039.0f); /* 1.5 * 2^23 + 127 */
    x = _mm256_max_ps(x, _mm256_set1_ps(-126.0f));
    const __m256 kn = _mm256_add_ps(x, magic);
    const __m256 f = _mm256_sub_ps(x, _mm256_sub_ps(kn, magic));
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(P5), f, _mm256_set1_ps(P4));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(P3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(P2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(P1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(kn), 23)));
}

/* Lanes [0, left) set (all for left >= 8, none for left <= 0). */
static inline __m256i tail_mask(int left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 8 floats of out at dst (32-byte aligned): streamed past the caches (NT_OUT) or stored */
static inline void store_out(float *dst, __m256 v) {
#if NT_OUT
    _mm256_stream_ps(dst, v);
#else
    _mm256_store_ps(dst, v);
#endif
}

static inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Pack rhs[K][N] into panels [NP][K][NR], zero-padding the last panel. */
static void pack_rhs(const float *restrict r, float *restrict pk) {
    for (int jp = 0; jp < NP; jp++) {
        const int j0 = jp * NR;
        const __m256i m0 = tail_mask(N - j0), m1 = tail_mask(N - j0 - 8);
        float *dst = pk + (size_t)jp * K * NR;
        for (int k = 0; k < K; k++) {
            const float *src = r + (size_t)k * N + j0;
            if (j0 + NR <= N) {
                _mm256_store_ps(dst + k * NR, _mm256_loadu_ps(src));
                _mm256_store_ps(dst + k * NR + 8, _mm256_loadu_ps(src + 8));
            } else {
                _mm256_store_ps(dst + k * NR, _mm256_maskload_ps(src, m0));
                _mm256_store_ps(dst + k * NR + 8, _mm256_maskload_ps(src + 8, m1));
            }
        }
    }
}

/* Scores of MR rows (row pointers in l[]) against all panels, into sc[MR][NPAD]; row maxima
 * (over the N valid columns) into vmax[MR] lanes. */
static inline void scores_block(const float *const l[MR], const float *restrict pk,
                                float *restrict sc, __m256 vmax[MR]) {
    for (int r = 0; r < MR; r++) vmax[r] = _mm256_set1_ps(-INFINITY);
    for (int jp = 0; jp < NP; jp++) {
        const float *p = pk + (size_t)jp * K * NR;
        __m256 acc[MR][2];
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            acc[r][0] = _mm256_setzero_ps();
            acc[r][1] = _mm256_setzero_ps();
        }
#pragma GCC unroll 4
        for (int k = 0; k < K; k++) {
            const __m256 b0 = _mm256_load_ps(p + k * NR);
            const __m256 b1 = _mm256_load_ps(p + k * NR + 8);
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++) {
                const __m256 a = _mm256_broadcast_ss(l[r] + k);
                acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
            }
        }
        const int j0 = jp * NR;
        if (j0 + NR <= N) {
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++) {
                _mm256_store_ps(sc + (size_t)r * NPAD + j0, acc[r][0]);
                _mm256_store_ps(sc + (size_t)r * NPAD + j0 + 8, acc[r][1]);
                vmax[r] = _mm256_max_ps(vmax[r], _mm256_max_ps(acc[r][0], acc[r][1]));
            }
        } else {
            const __m256 m0 = _mm256_castsi256_ps(tail_mask(N - j0));
            const __m256 m1 = _mm256_castsi256_ps(tail_mask(N - j0 - 8));
            for (int r = 0; r < MR; r++) {
                _mm256_store_ps(sc + (size_t)r * NPAD + j0, acc[r][0]);
                _mm256_store_ps(sc + (size_t)r * NPAD + j0 + 8, acc[r][1]);
                vmax[r] = _mm256_blendv_ps(vmax[r], _mm256_max_ps(vmax[r], acc[r][0]), m0);
                vmax[r] = _mm256_blendv_ps(vmax[r], _mm256_max_ps(vmax[r], acc[r][1]), m1);
            }
        }
    }
}

/* Softmax of one scratch row (N valid values, 64-byte aligned) into dst (any float alignment). */
static inline void softmax_row(float *restrict s, __m256 vmax, float *restrict dst) {
    const float mx = hmax8(vmax);
    const __m256 l2e = _mm256_set1_ps(L2E);
    const __m256 ml = _mm256_set1_ps(mx * L2E);
    /* one vector per iteration and one sum: with the exp's constants that is 14 live ymm
     * registers, so none is reloaded from memory (a little faster in the whole kernel than two
     * vectors per iteration with constants spilled) */
    __m256 sum = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= N; j += 8) {
        const __m256 e = exp2_ps(_mm256_fmsub_ps(_mm256_load_ps(s + j), l2e, ml));
        _mm256_store_ps(s + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (j < N) { /* the padded lanes (x may be large there) are left out of the sum */
        const __m256 e = exp2_ps(_mm256_fmsub_ps(_mm256_load_ps(s + j), l2e, ml));
        _mm256_store_ps(s + j, e);
        sum = _mm256_add_ps(sum, _mm256_and_ps(_mm256_castsi256_ps(tail_mask(N - j)), e));
    }
    const __m256 inv = _mm256_set1_ps(1.0f / hsum8(sum));
    /* head: up to the first 32-byte boundary of dst */
    int head = (int)(((32u - ((uintptr_t)dst & 31u)) & 31u) / 4u);
    if (head > N) head = N;
    if (head) _mm256_maskstore_ps(dst, tail_mask(head), _mm256_mul_ps(_mm256_load_ps(s), inv));
    j = head;
    for (; j + 8 <= N; j += 8)
        store_out(dst + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), inv));
    if (j < N) /* s has NPAD >= j + 8 floats */
        _mm256_maskstore_ps(dst + j, tail_mask(N - j), _mm256_mul_ps(_mm256_loadu_ps(s + j), inv));
}

/* The rows of one unit: scores of its MR rows, then the softmax of its first `rows` rows, which
 * are rows row0, row0 + 1, ... of out viewed as [B*M, N]. */
static inline void unit_rows(const float *const l[MR], const float *restrict pk,
                             float *restrict sc, int rows, float *restrict out, size_t row0) {
    __m256 vmax[MR];
    scores_block(l, pk, sc, vmax);
    for (int r = 0; r < rows; r++)
        softmax_row(sc + (size_t)r * NPAD, vmax[r], out + (row0 + (size_t)r) * N);
}

static inline void end_stores(void) {
    if (NT_OUT) _mm_sfence(); /* the non-temporal stores are weakly ordered */
}

#else /* portable: GCC vector extensions and loops the compiler vectorizes, no intrinsics */

typedef float v4f __attribute__((vector_size(16)));

/* 2^x for x <= ~0: x < -126 is clamped to -126 (a negligible 1.2e-38 next to the row's maximum
 * term 1) on the bits, with an unsigned min: the floats <= -126 are the patterns above
 * bits(-126) (a float ?: would be a branch under -ftrapping-math and keep the loop scalar). */
static inline float exp2_1(float x) {
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    xb = xb < 0xC2FC0000u ? xb : 0xC2FC0000u; /* bits(-126.0f) */
    memcpy(&x, &xb, sizeof x);
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

/* Pack rhs[K][N] into panels [NP][K][NR], zero-padding the last panel. */
static void pack_rhs(const float *restrict r, float *restrict pk) {
    for (int jp = 0; jp < NP; jp++) {
        const int j0 = jp * NR, w = N - j0 < NR ? N - j0 : NR;
        float *dst = pk + (size_t)jp * K * NR;
        for (int k = 0; k < K; k++) {
            memcpy(dst + k * NR, r + (size_t)k * N + j0, sizeof(float) * (size_t)w);
            if (w < NR) memset(dst + k * NR + w, 0, sizeof(float) * (size_t)(NR - w));
        }
    }
}

/* Scores of MR rows (row pointers in l[]) against all panels, into sc[MR][NPAD]. */
static inline void scores_block(const float *const l[MR], const float *restrict pk,
                                float *restrict sc) {
    for (int jp = 0; jp < NP; jp++) {
        const float *p = pk + (size_t)jp * K * NR;
        v4f acc[MR][2];
        for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = (v4f){0.0f, 0.0f, 0.0f, 0.0f};
#pragma GCC unroll 4
        for (int k = 0; k < K; k++) {
            const v4f b0 = *(const v4f *)(p + k * NR);
            const v4f b1 = *(const v4f *)(p + k * NR + 4);
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++) {
                const float a = l[r][k];
                acc[r][0] += a * b0;
                acc[r][1] += a * b1;
            }
        }
        for (int r = 0; r < MR; r++) {
            *(v4f *)(sc + (size_t)r * NPAD + jp * NR) = acc[r][0];
            *(v4f *)(sc + (size_t)r * NPAD + jp * NR + 4) = acc[r][1];
        }
    }
}

/* Softmax of one scratch row (its N valid values) into dst. */
static inline void softmax_row(float *restrict s, float *restrict dst) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < N; j++) mx = s[j] > mx ? s[j] : mx;
    const float ml = mx * L2E;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < N; j++) {
        const float e = exp2_1(s[j] * L2E - ml);
        s[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j < N; j++) dst[j] = s[j] * inv;
}

/* The rows of one unit: scores of its MR rows, then the softmax of its first `rows` rows, which
 * are rows row0, row0 + 1, ... of out viewed as [B*M, N]. */
static inline void unit_rows(const float *const l[MR], const float *restrict pk,
                             float *restrict sc, int rows, float *restrict out, size_t row0) {
    scores_block(l, pk, sc);
    for (int r = 0; r < rows; r++) softmax_row(sc + (size_t)r * NPAD, out + (row0 + (size_t)r) * N);
}

static inline void end_stores(void) {}

#endif

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
                unit_rows(l, pk, sc, rows, out, (size_t)b * M + (size_t)i0);
            }
            end_stores();
        }
        free(pk);
        free(sc);
    }
}
