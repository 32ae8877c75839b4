/* matmul_add_rmsnorm expert: y = x @ w + z;  out = y * g / sqrt(mean(y^2, axis=1) + 1e-5).
 * Three code paths, chosen by the compiler's target.  All three share the row blocks, threads,
 * prefetch queue and deferred normalization described below (kernel() at the end).  Cache
 * blocking comes from the build's ACCELOPT_L1D_BYTES and ACCELOPT_L2_BYTES (defaults for a
 * cross build): MB_BYTES = 0 sizes the row blocks to 7/16 of L2, WL1 = 0 the L1 slices of w
 * (non-AVX-512 paths) to a third of L1.
 *  - AVX-512 (__AVX512F__): tuned on Zen 5 (2 cores, 48 KiB L1d and 1 MiB L2 per core,
 *    32 MiB L3), described below;
 *  - AVX2 + FMA (__AVX2__ and __FMA__, e.g. Zen 3, Haswell): ymm register tiles of 12
 *    accumulators (6 x 16, 4 x 24 or 3 x 32, NR dividing N where possible: 6 x 16 for N = 640,
 *    M = 1280).  With half the accumulators of the AVX-512 tile a call needs twice the w bytes
 *    per FMA, so w is always packed per thread into contiguous K x NR panels (read in place, a
 *    panel's rows N floats apart fall into few L1 sets: 8 of 64 for N = 640) and K is cut into
 *    blocks whose w slice (at most WL1 bytes, a third of L1) stays in L1 while the strips of a
 *    row block pass, the partial tiles accumulating in the y scratch block (gemm_block() of the
 *    non-AVX-512 paths; its prefetch queue holds z 4 calls ahead and the next block's x).  Edges
 *    are masked with _mm256_maskload_ps / _mm256_maskstore_ps; out is written with streaming
 *    stores on its 32-byte-aligned part;
 *  - portable (anything else, aarch64 included): the AVX2 path's structure with GCC vector
 *    extensions (4-wide): a 6 x 16 (aarch64), 3 x 16 or 6 x 8 tile, zero-padded w panels, plain
 *    stores.
 *
 * AVX-512 path:
 * Threads: the norm needs whole rows, so the threads split the rows.  Row blocks of MB rows
 * (x block + y block about MB_BYTES, 7/16 of L2: 448 KiB of 1 MiB) are handed out dynamically:
 * block t is thread t's first, the others are claimed one ahead so that the next block's x can
 * be prefetched.
 * GEMM: for each NR-wide column panel of w, for each MR-row strip of the block, an MR x NR
 * register tile (MR*NV zmm accumulators; per k, NV zmm of w and MR broadcasts of x) computes
 * x @ w over the whole K; the tile shape is chosen so that NR divides N (10 x 32 for N = 640,
 * M = 1280).  w is read in place (row stride N; its panel stays in L2 while every strip of the
 * block passes) unless N makes its rows alias in the caches (N % 512 == 0), in which case each
 * thread packs its own K x NR panels during its first block.  x strips come from L2.
 * Epilogue: z is added, y is written to a per-thread scratch block (L2) and the row sums of y^2
 * are taken from the registers.  While the next block is computed, the finished one is scaled
 * by g / sqrt(ss / N + eps) a few rows after each micro-kernel call and written to out with
 * streaming stores on its 64-byte-aligned part, so the output traffic overlaps the FMAs.
 * Prefetch: z tiles 4 calls ahead, the next block's x, and in a thread's first block the next
 * w panel, all queued per call and issued a few every KSTEP k-steps inside the micro-kernel.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#if defined(__AVX512F__)
/* register tile: pick a shape whose NR divides N (no padded columns), and MR dividing M if any */
#if (N % 48 == 0) && (M % 8 == 0)
#define MR 8
#define NV 3
#elif (N % 32 == 0) && (M % 10 == 0)
#define MR 10
#define NV 2
#elif (N % 64 == 0) && (M % 6 == 0)
#define MR 6
#define NV 4
#elif (N % 32 == 0)
#define MR 12
#define NV 2
#elif (N % 48 == 0)
#define MR 8
#define NV 3
#elif (N % 64 == 0)
#define MR 6
#define NV 4
#else
#define MR 12
#define NV 2
#endif
#define NR (16 * NV)
#define NP ((N + NR - 1) / NR)          /* column panels */
#define NTAIL (N - (NP - 1) * NR)       /* columns in the last panel, 1..NR */
#define NVT ((NTAIL + 15) / 16)         /* vectors in the last panel */
#define MLAST ((__mmask16)(NTAIL % 16 ? (1u << (NTAIL % 16)) - 1u : 0xFFFFu))
#define FULLP (NTAIL == NR)             /* every panel full */
#define MT (M % MR)                     /* rows in the last, partial strip */
#define YLD ((N + 15) / 16 * 16)        /* scratch row stride */
#define MFULL ((__mmask16)0xFFFF)
#define PREFETCH0(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define SFENCE() _mm_sfence()
/* w is used in place (row stride N) unless its rows alias in the caches (stride a multiple of
 * 2 KiB), where each thread packs its own copy into K x NR panels */
#if (N % 512 == 0)
#define PACKW 1
#else
#define PACKW 0
#endif

#elif defined(__AVX2__) && defined(__FMA__)
/* AVX2 register tile (16 ymm): 12 accumulators (6 x 16, 4 x 24 or 3 x 32), NR dividing N and MR
 * dividing M where possible (6 x 16 for N = 640, M = 1280, with a last strip of 2 rows) */
#ifndef MR
#if (N % 24 == 0) && (M % 4 == 0)
#define MR 4
#define NV 3
#elif (N % 16 == 0) && (M % 6 == 0)
#define MR 6
#define NV 2
#elif (N % 32 == 0) && (M % 3 == 0)
#define MR 3
#define NV 4
#elif (N % 16 == 0)
#define MR 6
#define NV 2
#elif (N % 24 == 0)
#define MR 4
#define NV 3
#else
#define MR 6
#define NV 2
#endif
#endif
#define VL 8                            /* floats per vector */
#define NR (VL * NV)
#define NP ((N + NR - 1) / NR)          /* column panels */
#define NTAIL (N - (NP - 1) * NR)       /* columns in the last panel, 1..NR */
#define NVT ((NTAIL + VL - 1) / VL)     /* vectors in the last panel */
#define MLAST (NTAIL % VL ? NTAIL % VL : VL) /* valid lanes of its last vector */
#define MFULL VL
#define FULLP (NTAIL == NR)             /* every panel full */
#define MT (M % MR)                     /* rows in the last, partial strip */
#define YLD ((N + VL - 1) / VL * VL)    /* scratch row stride */
#define PREFETCH0(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define SFENCE() _mm_sfence()
#define PACKW 1 /* w packed once, shared by the threads (see gemm_block of these paths) */

#else
/* portable register tile (4-wide vectors): 6 x 16 where there are 32 vector registers
 * (aarch64), 3 x 16 (N % 16 == 0) or 6 x 8 elsewhere; w is always packed (zero-padded panels,
 * no masked loads) */
#ifndef MR
#if defined(__aarch64__)
#define MR 6
#define NV 4
#elif (N % 16 == 0)
#define MR 3
#define NV 4
#else
#define MR 6
#define NV 2
#endif
#endif
#define VL 4
#define NR (VL * NV)
#define NP ((N + NR - 1) / NR)
#define NTAIL (N - (NP - 1) * NR)
#define NVT ((NTAIL + VL - 1) / VL)
#define MLAST (NTAIL % VL ? NTAIL % VL : VL)
#define MFULL VL
#define FULLP (NTAIL == NR)
#define MT (M % MR)
#define YLD ((N + VL - 1) / VL * VL)
#define PREFETCH0(p) __builtin_prefetch((p), 0, 3)
#define SFENCE() ((void)0)
#define PACKW 1
#endif

/* per-core cache sizes; the build defines them from sysfs (a cross build does not) */
#ifndef ACCELOPT_L1D_BYTES
#define ACCELOPT_L1D_BYTES 32768
#endif
#ifndef ACCELOPT_L2_BYTES
#define ACCELOPT_L2_BYTES 524288
#endif

/* bytes of a row block (x block + y block); 0: 7/16 of L2 (448 KiB of 1 MiB: the rest holds the
 * w panel, the next block's prefetched x and the z tiles passing through) */
#ifndef MB_BYTES
#define MB_BYTES 0 /* tune: 0 229376 458752 917504 1835008 */
#endif
#if MB_BYTES > 0
#define MBB MB_BYTES
#else
#define MBB (ACCELOPT_L2_BYTES / 16 * 7)
#endif
/* rows per block: x block (MB x K) and y block (MB x N) together about MBB bytes */
#define MB0 (MBB / (4 * (K + N)) / MR * MR)
/* at least ~96 rows when K is large, so that a w panel serves enough strips */
#define MB1 (MB0 >= 48 ? MB0 : (96 + MR - 1) / MR * MR)
/* at least two blocks, so that both cores work on small problems */
#define MB (M >= 2 * MB1 ? MB1 : ((M + 1) / 2 + MR - 1) / MR * MR)
#define NBLK ((M + MB - 1) / MB)
#if defined(__AVX512F__)
#define NBE NBLK
#define MBE MB
#else
/* the same number of blocks rounded up to even, each of whole strips and as equal as possible
 * (block b starts at strip b * NSTR / NBE), so that the threads finish together; MBE rows at most */
#define NSTR ((M + MR - 1) / MR)
#define NBE (NBLK > 1 ? ((NBLK + 1) / 2 * 2 < NSTR ? (NBLK + 1) / 2 * 2 : NSTR) : 1)
#define BLK0(b) ((int)((long)(b) * NSTR / NBE) * MR)
#define MBE ((NSTR + NBE - 1) / NBE * MR)
#endif

#define EPS 1e-5f
#ifndef KSTEP
#define KSTEP 32
#endif
#define PQMAX 256

/* the lines to prefetch during the next micro-kernel call (issued at once past PQMAX) */
struct pfq {
    const char *a[PQMAX];
    int n;
};

static inline void pq_add(struct pfq *q, const void *p) {
    if (q->n < PQMAX)
        q->a[q->n++] = (const char *)p;
    else
        PREFETCH0(p);
}

#if PACKW
#define BLD NR
#else
#define BLD N
#endif

#if defined(__AVX512F__)

/* Y[mr x 16nv] = A[mr rows, K] @ Bp[K x NR] + Z ; ss[r] += sum over the tile of Y^2 */
static inline __attribute__((always_inline)) void ukr(const int mr, const int nv, const __mmask16 ml,
                                                      const float *restrict A,
                                                      const float *restrict Bp,
                                                      const float *restrict Z, float *restrict Y,
                                                      float *restrict ss, const char *const *pq,
                                                      const int npq) {
    __m512 c[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) c[r][v] = _mm512_setzero_ps();
    /* the prefetches of this call are spread over its k loop, a few every KSTEP steps */
    const int per = (npq + (K + KSTEP - 1) / KSTEP - 1) / ((K + KSTEP - 1) / KSTEP);
    int qi = 0;
    for (int k0 = 0; k0 < K; k0 += KSTEP) {
        const int k1 = k0 + KSTEP < K ? k0 + KSTEP : K;
        for (int k = k0; k < k1; k++) {
            __m512 b[NV];
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                b[v] = PACKW ? _mm512_load_ps(Bp + 16 * v)
                     : (v == nv - 1 && ml != (__mmask16)0xFFFF) ? _mm512_maskz_loadu_ps(ml, Bp + 16 * v)
                                                              : _mm512_loadu_ps(Bp + 16 * v);
#pragma GCC unroll 16
            for (int r = 0; r < mr; r++) {
                __m512 a = _mm512_set1_ps(A[(size_t)r * K + k]);
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++) c[r][v] = _mm512_fmadd_ps(a, b[v], c[r][v]);
            }
            Bp += BLD;
        }
        for (int e = 0; e < per && qi < npq; e++, qi++) _mm_prefetch(pq[qi], _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++) {
        const float *z = Z + (size_t)r * N;
        float *y = Y + (size_t)r * YLD;
        __m512 s = _mm512_setzero_ps();
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            const __mmask16 m = (v == nv - 1) ? ml : (__mmask16)0xFFFF;
            __m512 t;
            if (m == (__mmask16)0xFFFF) {
                t = _mm512_add_ps(c[r][v], _mm512_loadu_ps(z + 16 * v));
                _mm512_store_ps(y + 16 * v, t);
            } else {
                t = _mm512_add_ps(c[r][v], _mm512_maskz_loadu_ps(m, z + 16 * v));
                _mm512_mask_store_ps(y + 16 * v, m, t);
            }
            s = _mm512_fmadd_ps(t, t, s);
        }
        ss[r] += _mm512_reduce_add_ps(s);
    }
}

/* pack columns [j0, j0 + w) of w (all K rows) into a K x NR panel, zero padded */
static inline void pack_panel(const float *restrict W, float *restrict dst, int j0, int w) {
    const float *src = W + j0;
    if (w == NR) {
        for (int k = 0; k < K; k++) {
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                _mm512_store_ps(dst + 16 * v, _mm512_loadu_ps(src + 16 * v));
            src += N;
            dst += NR;
        }
    } else {
        for (int k = 0; k < K; k++) {
            for (int v = 0; v < NV; v++) {
                int n = w - 16 * v;
                __mmask16 m = n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1u);
                _mm512_store_ps(dst + 16 * v, _mm512_maskz_loadu_ps(m, src + 16 * v));
            }
            src += N;
            dst += NR;
        }
    }
}

/* out[i0 + r, :] = Y[r, :] * g / sqrt(ss[r] / N + eps), streaming stores on the aligned part */
static void normalize_rows(const float *restrict g, const float *restrict Y,
                           const float *restrict ss, float *restrict out, int i0, int r0, int r1) {
    for (int r = r0; r < r1; r++) {
        const float *y = Y + (size_t)r * YLD;
        float *o = out + (size_t)(i0 + r) * N;
        const __m512 s = _mm512_set1_ps(1.0f / sqrtf(ss[r] / (float)N + EPS));
        int h = (int)(((64u - ((uintptr_t)o & 63u)) & 63u) / 4u);
        if (h > N) h = N;
        if (h) {
            const __mmask16 m = (__mmask16)((1u << h) - 1u);
            _mm512_mask_storeu_ps(o, m, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, y), s),
                                                      _mm512_maskz_loadu_ps(m, g)));
        }
        int j = h;
        for (; j + 16 <= N; j += 16)
            _mm512_stream_ps(o + j, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(y + j), s),
                                                  _mm512_loadu_ps(g + j)));
        if (j < N) {
            const __mmask16 m = (__mmask16)((1u << (N - j)) - 1u);
            _mm512_mask_storeu_ps(o + j, m,
                                  _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + j), s),
                                                _mm512_maskz_loadu_ps(m, g + j)));
        }
    }
}

#elif defined(__AVX2__) && defined(__FMA__)

static const int32_t mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* the first n (0..8) lanes */
static inline __m256i lanes(int n) { return _mm256_loadu_si256((const __m256i *)(mask_tab + 8 - n)); }

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* one K block: acc[mr x 8nv] (+)= A[mr rows, kc] @ Bp[kc x NR], acc starting at 0 (first) or at
 * Y; then either Y = acc (not fin) or Y = acc + Z and ss[r] += sum over the tile of Y^2 (fin).
 * The last vector has ml valid lanes. */
static inline __attribute__((always_inline)) void ukr(const int mr, const int nv, const int ml,
                                                      const int kc, const int first, const int fin,
                                                      const float *restrict A,
                                                      const float *restrict Bp,
                                                      const float *restrict Z, float *restrict Y,
                                                      float *restrict ss, const char *const *pq,
                                                      const int npq) {
    __m256 c[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            c[r][v] = first ? _mm256_setzero_ps() : _mm256_load_ps(Y + (size_t)r * YLD + 8 * v);
    const __m256i mv = lanes(ml);
    /* the prefetches of this call are spread over its k loop, a few every KSTEP steps */
    const int per = (npq + (kc + KSTEP - 1) / KSTEP - 1) / ((kc + KSTEP - 1) / KSTEP);
    int qi = 0;
    for (int k0 = 0; k0 < kc; k0 += KSTEP) {
        const int k1 = k0 + KSTEP < kc ? k0 + KSTEP : kc;
        for (int k = k0; k < k1; k++) {
            __m256 b[NV];
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                b[v] = PACKW ? _mm256_load_ps(Bp + 8 * v)
                     : (v == nv - 1 && ml != 8) ? _mm256_maskload_ps(Bp + 8 * v, mv)
                                                : _mm256_loadu_ps(Bp + 8 * v);
#pragma GCC unroll 16
            for (int r = 0; r < mr; r++) {
                __m256 a = _mm256_broadcast_ss(A + (size_t)r * K + k);
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++) c[r][v] = _mm256_fmadd_ps(a, b[v], c[r][v]);
            }
            Bp += BLD;
        }
        for (int e = 0; e < per && qi < npq; e++, qi++) _mm_prefetch(pq[qi], _MM_HINT_T0);
    }
    while (qi < npq) _mm_prefetch(pq[qi++], _MM_HINT_T0);
    if (!fin) { /* lanes past N hold 0, inside the padded scratch row */
#pragma GCC unroll 16
        for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) _mm256_store_ps(Y + (size_t)r * YLD + 8 * v, c[r][v]);
        return;
    }
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++) {
        const float *z = Z + (size_t)r * N;
        float *y = Y + (size_t)r * YLD;
        __m256 s = _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            __m256 t;
            if (v != nv - 1 || ml == 8) {
                t = _mm256_add_ps(c[r][v], _mm256_loadu_ps(z + 8 * v));
                _mm256_store_ps(y + 8 * v, t);
            } else { /* lanes past N: w and z read as 0, so t is 0 there */
                t = _mm256_add_ps(c[r][v], _mm256_maskload_ps(z + 8 * v, mv));
                _mm256_maskstore_ps(y + 8 * v, mv, t);
            }
            s = _mm256_fmadd_ps(t, t, s);
        }
        ss[r] += hsum(s);
    }
}

/* pack columns [j0, j0 + w) of w (all K rows) into a K x NR panel, zero padded */
static inline void pack_panel(const float *restrict W, float *restrict dst, int j0, int w) {
    const float *src = W + j0;
    if (w == NR) {
        for (int k = 0; k < K; k++) {
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) _mm256_store_ps(dst + 8 * v, _mm256_loadu_ps(src + 8 * v));
            src += N;
            dst += NR;
        }
    } else {
        for (int k = 0; k < K; k++) {
            for (int v = 0; v < NV; v++) {
                int n = w - 8 * v;
                n = n < 0 ? 0 : n > 8 ? 8 : n;
                _mm256_store_ps(dst + 8 * v, _mm256_maskload_ps(src + 8 * v, lanes(n)));
            }
            src += N;
            dst += NR;
        }
    }
}

/* out[i0 + r, :] = Y[r, :] * g / sqrt(ss[r] / N + eps), streaming stores on the aligned part */
static void normalize_rows(const float *restrict g, const float *restrict Y,
                           const float *restrict ss, float *restrict out, int i0, int r0, int r1) {
    for (int r = r0; r < r1; r++) {
        const float *y = Y + (size_t)r * YLD;
        float *o = out + (size_t)(i0 + r) * N;
        const __m256 s = _mm256_set1_ps(1.0f / sqrtf(ss[r] / (float)N + EPS));
        int h = (int)(((32u - ((uintptr_t)o & 31u)) & 31u) / 4u);
        if (h > N) h = N;
        if (h) {
            const __m256i m = lanes(h);
            _mm256_maskstore_ps(o, m, _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(y, m), s),
                                                    _mm256_maskload_ps(g, m)));
        }
        int j = h;
        for (; j + 8 <= N; j += 8)
            _mm256_stream_ps(o + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(y + j), s),
                                                  _mm256_loadu_ps(g + j)));
        if (j < N) {
            const __m256i m = lanes(N - j);
            _mm256_maskstore_ps(o + j, m, _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(y + j, m), s),
                                                        _mm256_maskload_ps(g + j, m)));
        }
    }
}

#else
/* portable: GCC vector extensions (4-wide), w always packed */
typedef float v4 __attribute__((vector_size(16)));

static inline v4 loadu4(const float *p) {
    v4 r;
    memcpy(&r, p, sizeof r);
    return r;
}

/* one K block: acc[mr x 4nv] (+)= A[mr rows, kc] @ Bp[kc x NR], acc starting at 0 (first) or at
 * Y; then either Y = acc (not fin) or Y = acc + Z and ss[r] += sum over the tile of Y^2 (fin).
 * The last vector has ml valid lanes (the packed panel is zero past N). */
static inline __attribute__((always_inline)) void ukr(const int mr, const int nv, const int ml,
                                                      const int kc, const int first, const int fin,
                                                      const float *restrict A,
                                                      const float *restrict Bp,
                                                      const float *restrict Z, float *restrict Y,
                                                      float *restrict ss, const char *const *pq,
                                                      const int npq) {
    v4 c[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            c[r][v] = first ? (v4){0.0f, 0.0f, 0.0f, 0.0f} : *(const v4 *)(Y + (size_t)r * YLD + 4 * v);
    const int per = (npq + (kc + KSTEP - 1) / KSTEP - 1) / ((kc + KSTEP - 1) / KSTEP);
    int qi = 0;
    for (int k0 = 0; k0 < kc; k0 += KSTEP) {
        const int k1 = k0 + KSTEP < kc ? k0 + KSTEP : kc;
        for (int k = k0; k < k1; k++) {
            v4 b[NV];
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) b[v] = *(const v4 *)(Bp + 4 * v);
#pragma GCC unroll 16
            for (int r = 0; r < mr; r++) {
                const float x = A[(size_t)r * K + k];
                const v4 a = {x, x, x, x};
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++) c[r][v] += a * b[v];
            }
            Bp += NR;
        }
        for (int e = 0; e < per && qi < npq; e++, qi++) PREFETCH0(pq[qi]);
    }
    while (qi < npq) PREFETCH0(pq[qi++]);
    if (!fin) {
#pragma GCC unroll 16
        for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) *(v4 *)(Y + (size_t)r * YLD + 4 * v) = c[r][v];
        return;
    }
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++) {
        const float *z = Z + (size_t)r * N;
        float *y = Y + (size_t)r * YLD;
        v4 s = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            v4 zv;
            if (v != nv - 1 || ml == 4) {
                zv = loadu4(z + 4 * v);
            } else {
                float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                for (int l = 0; l < ml; l++) t[l] = z[4 * v + l];
                zv = loadu4(t);
            }
            const v4 t = c[r][v] + zv;
            *(v4 *)(y + 4 * v) = t; /* within the padded scratch row */
            s += t * t;
        }
        ss[r] += (s[0] + s[1]) + (s[2] + s[3]);
    }
}

/* pack columns [j0, j0 + w) of w (all K rows) into a K x NR panel, zero padded */
static inline void pack_panel(const float *restrict W, float *restrict dst, int j0, int w) {
    const float *src = W + j0;
    for (int k = 0; k < K; k++) {
        for (int j = 0; j < w; j++) dst[j] = src[j];
        for (int j = w; j < NR; j++) dst[j] = 0.0f;
        src += N;
        dst += NR;
    }
}

/* out[i0 + r, :] = Y[r, :] * g / sqrt(ss[r] / N + eps) */
static void normalize_rows(const float *restrict g, const float *restrict Y,
                           const float *restrict ss, float *restrict out, int i0, int r0, int r1) {
    for (int r = r0; r < r1; r++) {
        const float *restrict y = Y + (size_t)r * YLD;
        float *restrict o = out + (size_t)(i0 + r) * N;
        const float s = 1.0f / sqrtf(ss[r] / (float)N + EPS);
        for (int j = 0; j < N; j++) o[j] = y[j] * s * g[j];
    }
}
#endif

/* a finished block of y waiting to be normalized and stored, a few rows after each call */
struct pending {
    const float *Y, *ss;
    int i0, mb, done, per;
};

static inline void drain(const float *restrict g, float *restrict out, struct pending *q, int rows) {
    int r1 = q->done + rows < q->mb ? q->done + rows : q->mb;
    if (r1 > q->done) normalize_rows(g, q->Y, q->ss, out, q->i0, q->done, r1);
    q->done = r1;
}

#if defined(__AVX512F__)
/* Y[0:mb, :] = x[i0:i0+mb] @ w + z[i0:i0+mb], ss[r] = sum of Y[r]^2.  With pack, the panels of Bp
 * are packed on the way.  xn/xn_lines: the next block's x, prefetched a slice per call. */
static void gemm_block(const float *restrict x, const float *restrict w, const float *restrict z,
                       float *restrict Y, float *restrict Bp, float *restrict ss, int i0, int mb,
                       int pack, const char *xn, size_t xn_lines, const float *restrict g,
                       float *restrict out, struct pending *q) {
    const int nstrips = mb / MR; /* full strips; a partial one only at the very end of M */
    const int calls = NP * (nstrips + 1);
    q->per = (q->mb - q->done + NP * nstrips - 1) / (NP * nstrips > 0 ? NP * nstrips : 1);
    const size_t xn_per = (xn_lines + calls - 1) / calls;
    size_t xn_done = 0;
    const int pf_rows = (K + nstrips) / (nstrips > 0 ? nstrips : 1);
    struct pfq pf;
    pf.n = 0;
    for (int p = 0; p < NP; p++) {
        const int last = (p == NP - 1);
#if PACKW
        float *Bpp = Bp + (size_t)p * K * NR;
        if (pack) pack_panel(w, Bpp, p * NR, last ? NTAIL : NR);
#else
        const float *Bpp = w + p * NR;
        (void)Bp;
#endif
        for (int s = 0; s < nstrips; s++) {
            const size_t i = (size_t)i0 + (size_t)s * MR;
            pf.n = 0;
            if (pack && !last) { /* first block: the next panel of w */
                int k0 = s * pf_rows, k1 = k0 + pf_rows < K ? k0 + pf_rows : K;
                for (int k = k0; k < k1; k++)
                    for (int l = 0; l < NR * 4; l += 64)
                        pq_add(&pf, (const char *)(w + (size_t)k * N + (p + 1) * NR) + l);
            }
            {   /* z of the call 4 ahead */
                const int cn = p * nstrips + s + 4, pn = cn / nstrips, sn = cn - pn * nstrips;
                if (pn < NP) {
                    const float *zz = z + ((size_t)i0 + (size_t)sn * MR) * N + pn * NR;
                    for (int r = 0; r < MR; r++)
                        for (int l = 0; l < NR * 4; l += 64) pq_add(&pf, (const char *)(zz + (size_t)r * N) + l);
                }
            }
            for (size_t e = 0; e < xn_per && xn_done < xn_lines; e++, xn_done++)
                pq_add(&pf, xn + 64 * xn_done);
            if (!last || FULLP)
                ukr(MR, NV, MFULL, x + i * K, Bpp, z + i * N + p * NR,
                    Y + (size_t)s * MR * YLD + p * NR, ss + s * MR, pf.a, pf.n);
            else
                ukr(MR, NVT, MLAST, x + i * K, Bpp, z + i * N + p * NR,
                    Y + (size_t)s * MR * YLD + p * NR, ss + s * MR, pf.a, pf.n);
            drain(g, out, q, q->per);
        }
#if MT > 0
        if (mb > nstrips * MR) {
            const size_t i = (size_t)i0 + (size_t)nstrips * MR;
            if (!last || FULLP)
                ukr(MT, NV, MFULL, x + i * K, Bpp, z + i * N + p * NR,
                    Y + (size_t)nstrips * MR * YLD + p * NR, ss + nstrips * MR, pf.a, 0);
            else
                ukr(MT, NVT, MLAST, x + i * K, Bpp, z + i * N + p * NR,
                    Y + (size_t)nstrips * MR * YLD + p * NR, ss + nstrips * MR, pf.a, 0);
        }
#endif
    }
}

#else
/* AVX2 and portable paths: half the accumulators of the AVX-512 tile, so a w panel streamed from
 * L2 for every call would need twice the L2 bandwidth per FMA.  K is therefore cut into NKB
 * blocks of KCB rows whose KCB x NR slice of the w panel (at most WL1B bytes) stays in L1 while all
 * the strips of the row block pass; the partial tiles are accumulated in Y (L2). */
/* bytes: the L1 share of a w slice; 0: a third of L1 (16 KiB of 48 KiB, the rest for the x
 * strips, the tiles of y and the prefetched lines) */
#ifndef WL1
#define WL1 0 /* tune: 0 8192 16384 32768 */
#endif
#if WL1 > 0
#define WL1B WL1
#else
#define WL1B (ACCELOPT_L1D_BYTES / 3 / 64 * 64)
#endif
#define KCW (WL1B / (4 * NR) > 8 ? WL1B / (4 * NR) : 8)
#define NKB ((K + KCW - 1) / KCW)                       /* K blocks */
#define KCB ((K + NKB - 1) / NKB)                       /* rows per K block */

/* Y[0:mb, :] = x[i0:i0+mb] @ w + z[i0:i0+mb], ss[r] = sum of Y[r]^2.  With pack, the panels of Bp
 * are packed on the way.  xn/xn_lines: the next block's x, prefetched a slice per call. */
static void gemm_block(const float *restrict x, const float *restrict w, const float *restrict z,
                       float *restrict Y, float *restrict Bp, float *restrict ss, int i0, int mb,
                       int pack, const char *xn, size_t xn_lines, const float *restrict g,
                       float *restrict out, struct pending *q) {
    const int nstrips = mb / MR; /* full strips; a partial one only at the very end of M */
    const int ncalls = NP * NKB * nstrips;
    const int calls = NP * NKB * (nstrips + 1);
    q->per = (q->mb - q->done + ncalls - 1) / (ncalls > 0 ? ncalls : 1);
    const size_t xn_per = (xn_lines + calls - 1) / calls;
    size_t xn_done = 0;
    struct pfq pf;
    pf.n = 0;
    for (int p = 0; p < NP; p++) {
        const int last = (p == NP - 1);
#if PACKW
        float *Bpp = Bp + (size_t)p * K * NR;
        if (pack) pack_panel(w, Bpp, p * NR, last ? NTAIL : NR);
#else
        const float *Bpp = w + p * NR;
        (void)Bp;
        (void)pack;
#endif
        for (int kb = 0; kb < NKB; kb++) {
            const int k0 = kb * KCB, kc = K - k0 < KCB ? K - k0 : KCB;
            const int first = kb == 0, fin = kb == NKB - 1;
            const float *Bk = Bpp + (size_t)k0 * BLD;
            for (int s = 0; s < nstrips; s++) {
                const size_t i = (size_t)i0 + (size_t)s * MR;
                pf.n = 0;
                {   /* z of the call 4 ahead, if it is one that adds z */
                    const int cn = (p * NKB + kb) * nstrips + s + 4, sn = cn % nstrips;
                    const int pn = cn / nstrips / NKB, kn = cn / nstrips % NKB;
                    if (pn < NP && kn == NKB - 1) {
                        const float *zz = z + ((size_t)i0 + (size_t)sn * MR) * N + pn * NR;
                        for (int r = 0; r < MR; r++)
                            for (int l = 0; l < NR * 4; l += 64) pq_add(&pf, (const char *)(zz + (size_t)r * N) + l);
                    }
                }
                for (size_t e = 0; e < xn_per && xn_done < xn_lines; e++, xn_done++)
                    pq_add(&pf, xn + 64 * xn_done);
                if (!last || FULLP)
                    ukr(MR, NV, MFULL, kc, first, fin, x + i * K + k0, Bk, z + i * N + p * NR,
                        Y + (size_t)s * MR * YLD + p * NR, ss + s * MR, pf.a, pf.n);
                else
                    ukr(MR, NVT, MLAST, kc, first, fin, x + i * K + k0, Bk, z + i * N + p * NR,
                        Y + (size_t)s * MR * YLD + p * NR, ss + s * MR, pf.a, pf.n);
                drain(g, out, q, q->per);
            }
#if MT > 0
            if (mb > nstrips * MR) {
                const size_t i = (size_t)i0 + (size_t)nstrips * MR;
                if (!last || FULLP)
                    ukr(MT, NV, MFULL, kc, first, fin, x + i * K + k0, Bk, z + i * N + p * NR,
                        Y + (size_t)nstrips * MR * YLD + p * NR, ss + nstrips * MR, pf.a, 0);
                else
                    ukr(MT, NVT, MLAST, kc, first, fin, x + i * K + k0, Bk, z + i * N + p * NR,
                        Y + (size_t)nstrips * MR * YLD + p * NR, ss + nstrips * MR, pf.a, 0);
            }
#endif
        }
    }
}
#endif

void kernel(const float *restrict x, const float *restrict w, const float *restrict z,
            const float *restrict g, float *restrict out) {
    int nth = omp_get_max_threads();
    if (nth > NBE) nth = NBE;
    if (nth < 1) nth = 1;
    const size_t bsz = PACKW ? (size_t)NP * K * NR : 0;     /* packed w */
    const size_t ysz = (size_t)MBE * YLD;                   /* y scratch block */
    const size_t ssz = ((size_t)MBE + 15) & ~(size_t)15;    /* row sums */
#if defined(__AVX512F__)
    const size_t per = bsz + 2 * (ysz + ssz);
    float *buf = (float *)aligned_alloc(64, per * sizeof(float) * nth);
#else /* one packed copy of w, shared by the threads */
    const size_t per = (2 * (ysz + ssz) + 15) & ~(size_t)15;
    float *buf = (float *)aligned_alloc(64, (per * nth + bsz) * sizeof(float));
    float *wp = buf + per * nth;
#endif
    int claimed = 0; /* block t is thread t's first; the others are claimed one ahead */

#pragma omp parallel num_threads(nth)
    {
        const int t = omp_get_thread_num();
#if defined(__AVX512F__)
        float *Bp = buf + per * t;
        float *Yb[2] = {Bp + bsz, Bp + bsz + ysz + ssz};
#else
        float *Bp = wp;
        float *Yb[2] = {buf + per * t, buf + per * t + ysz + ssz};
#endif
        int cur = 0;
        struct pending q = {Yb[1], Yb[1] + ysz, 0, 0, 0, 0};
#if defined(__AVX512F__)
        int first = 1;
#else /* the threads pack w's panels together, then every block reads the shared copy */
        const int first = 0;
#pragma omp for schedule(static)
        for (int p = 0; p < NP; p++) pack_panel(w, wp + (size_t)p * K * NR, p * NR, p == NP - 1 ? NTAIL : NR);
#endif
        const int P = omp_get_num_threads();
        int b = t;
        while (b < NBE) {
            const int nb = P + __atomic_fetch_add(&claimed, 1, __ATOMIC_RELAXED);
#if defined(__AVX512F__)
            const int i = b * MB, mb = M - i < MB ? M - i : MB;
#else
            const int i = BLK0(b), mb = (BLK0(b + 1) < M ? BLK0(b + 1) : M) - i;
#endif
            const char *xn = (const char *)x;
            size_t xn_lines = 0;
            if (nb < NBE) {
#if defined(__AVX512F__)
                const int mbn = M - nb * MB < MB ? M - nb * MB : MB;
                xn = (const char *)(x + (size_t)nb * MB * K);
#else
                const int in = BLK0(nb), mbn = (BLK0(nb + 1) < M ? BLK0(nb + 1) : M) - in;
                xn = (const char *)(x + (size_t)in * K);
#endif
                xn_lines = ((size_t)mbn * K * 4 + 63) / 64;
            }
            float *Y = Yb[cur], *ss = Yb[cur] + ysz;
            memset(ss, 0, sizeof(float) * (size_t)mb);
            gemm_block(x, w, z, Y, Bp, ss, i, mb, first, xn, xn_lines, g, out, &q);
#if defined(__AVX512F__)
            first = 0;
#endif
            drain(g, out, &q, q.mb);                   /* whatever of the previous block is left */
            q.Y = Y, q.ss = ss, q.i0 = i, q.mb = mb, q.done = 0;
            cur ^= 1;
            b = nb;
        }
        drain(g, out, &q, q.mb);
        SFENCE();
    }
    free(buf);
}
