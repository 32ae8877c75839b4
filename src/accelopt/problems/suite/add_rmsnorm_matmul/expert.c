/* rmsnorm_matmul expert: out[M, N] = (x / sqrt(mean(x^2, axis=1))) @ w, float32 row-major.
 * The norm is a per-row scale, so it commutes with the product:
 *     out[i, :] = inv_rms[i] * (x[i, :] @ w),   inv_rms[i] = 1 / sqrt(sum_k x[i, k]^2 / K);
 * x is multiplied as it is and each row of the result is scaled in the GEMM's epilogue.
 *
 * The GEMM is the matmul expert's design (see matmul/expert.c).  Three code paths, chosen by
 * the compiler's target:
 *  - AVX-512 (__AVX512F__): an 8 x 48 register tile, 24 zmm accumulators; per k one row of the
 *    48-wide B micro-panel (3 zmm) and 8 broadcasts of x, 24 FMAs;
 *  - AVX2 + FMA (__AVX2__ and __FMA__): a 4 x 24 tile on ymm registers;
 *  - portable (anything else, aarch64 included): GCC vector extensions (4-wide), an 8 x 12
 *    (aarch64) or 4 x 12 tile, the panel packed before its first use.
 * All three share the driver (kernel() at the end):
 *  - x is read in place through MR row pointers: an MR x KC strip stays in L1 while it meets
 *    every micro-panel of the current B block;
 *  - B (w) is cut into column chunks of NCB columns and K blocks of at most KCMAX rows; a chunk's
 *    KC x NCB block is packed into a per-thread buffer that stays in L2 while all the strips of
 *    x stream past it.  The packing is fused into the first strip (its micro-kernel reads w in
 *    place and stores the packed copy); the block read next is prefetched during the last
 *    PFFRAC-th of the strips, a few lines every KSTEP k-steps inside the micro-kernel;
 *  - threads take column chunks dynamically (chunk t is thread t's first, the others are
 *    claimed one ahead so that they can be prefetched); the chunk count is a multiple of the
 *    thread count, so that the threads finish together;
 *  - the norm: during its first chunk a thread sums x[i, :]^2 over each strip's K block just
 *    before the strip's micro-kernels read it (the strip is then in L1 for them), and turns the
 *    sums into inv_rms at the last K block; its later chunks reuse them.  The last K block's
 *    epilogue multiplies each tile row by its inv_rms (after adding the earlier K blocks'
 *    partial sums, kept unscaled in out); with K in one block each tile is written once, with
 *    streaming stores when out is 64-byte aligned.
 * Cache blocking comes from the build's ACCELOPT_L1D_BYTES and ACCELOPT_L2_BYTES (defaults for
 * a cross build): KCMAX = 0 sizes the x strip to half of L1, NCB = 0 the B block to half of L2.
 * Edges: rows past M reuse the last row's pointer (their results are dropped), columns past N
 * are masked.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* per-core cache sizes; the build defines them from sysfs (a cross build does not) */
#ifndef ACCELOPT_L1D_BYTES
#define ACCELOPT_L1D_BYTES 32768
#endif
#ifndef ACCELOPT_L2_BYTES
#define ACCELOPT_L2_BYTES 524288
#endif

/* K block (rows of w per packed block); 0: the MR x KC strip of x takes half of L1 */
#ifndef KCMAX
#define KCMAX 0 /* tune: 0 256 384 512 640 768 1024 */
#endif
/* columns of w per packed block (rounded down to whole micro-panels); 0: the block takes half
 * of L2 */
#ifndef NCB
#define NCB 0 /* tune: 0 96 192 288 384 */
#endif
#ifndef PFFRAC
#define PFFRAC 4 /* tune: 2 4 8 */
#endif
#ifndef KSTEP
#define KSTEP 32 /* tune: 16 32 64 */ /* a power of two */
#endif
#define PQMAX 1024
#define DIVUP(a, b) (((a) + (b)-1) / (b))

#if defined(__AVX512F__)
#define MR 8
#define NR 48
#define PFHINT _MM_HINT_T2
#define PREFETCH(p) _mm_prefetch((p), PFHINT)
#define SFENCE() _mm_sfence()

static inline __mmask16 colmask(int nr, int v) {
    int n = nr - 16 * v;
    if (n >= 16) return (__mmask16)0xFFFF;
    if (n <= 0) return 0;
    return (__mmask16)((1u << n) - 1u);
}

/* C[mr x nr] (+)= A[8 rows, kc] * B[kc x 48], each row then scaled by sc[r] (sc: the last K
 * block).  With src, B is read from src (row stride N, nr valid columns), its row k scaled by
 * gk[k] and packed into Bp on the way, otherwise read from Bp.  pq: lines to prefetch, a few every KSTEP steps. */
static inline __attribute__((always_inline)) void ukr(int kc, const float *restrict A, int lda,
                                                      float *restrict Bp, float *restrict C,
                                                      int mr, int nr, int acc, int nt,
                                                      const float *restrict sc,
                                                      const float *restrict src,
                                                      const float *restrict gk,
                                                      const char *const *pq, int npq) {
    const float *a[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(r < mr ? r : mr - 1) * lda;
    __m512 c[MR][3];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < 3; v++) c[r][v] = _mm512_setzero_ps();
    const int per = DIVUP(npq, DIVUP(kc, KSTEP));
    int qi = 0;
    if (src) { /* first use of this panel: read B in place, keep a packed copy */
        const __mmask16 m0 = colmask(nr, 0), m1 = colmask(nr, 1), m2 = colmask(nr, 2);
        for (int k = 0; k < kc; k++) {
            __m512 b0, b1, b2;
            if (nr == NR) {
                b0 = _mm512_loadu_ps(src);
                b1 = _mm512_loadu_ps(src + 16);
                b2 = _mm512_loadu_ps(src + 32);
            } else {
                b0 = _mm512_maskz_loadu_ps(m0, src);
                b1 = _mm512_maskz_loadu_ps(m1, src + 16);
                b2 = _mm512_maskz_loadu_ps(m2, src + 32);
            }
            const __m512 gv = _mm512_set1_ps(gk[k]); /* fold g into the packed copy */
            b0 = _mm512_mul_ps(b0, gv);
            b1 = _mm512_mul_ps(b1, gv);
            b2 = _mm512_mul_ps(b2, gv);
            _mm512_store_ps(Bp, b0);
            _mm512_store_ps(Bp + 16, b1);
            _mm512_store_ps(Bp + 32, b2);
#pragma GCC unroll 8
            for (int r = 0; r < MR; r++) {
                __m512 av = _mm512_set1_ps(a[r][k]);
                c[r][0] = _mm512_fmadd_ps(av, b0, c[r][0]);
                c[r][1] = _mm512_fmadd_ps(av, b1, c[r][1]);
                c[r][2] = _mm512_fmadd_ps(av, b2, c[r][2]);
            }
            Bp += NR;
            src += N;
            if ((k & (KSTEP - 1)) == KSTEP - 1)
                for (int e = 0; e < per && qi < npq; e++, qi++) _mm_prefetch(pq[qi], PFHINT);
        }
    } else {
        for (int k = 0; k < kc; k++) {
            __m512 b0 = _mm512_load_ps(Bp);
            __m512 b1 = _mm512_load_ps(Bp + 16);
            __m512 b2 = _mm512_load_ps(Bp + 32);
#pragma GCC unroll 8
            for (int r = 0; r < MR; r++) {
                __m512 av = _mm512_set1_ps(a[r][k]);
                c[r][0] = _mm512_fmadd_ps(av, b0, c[r][0]);
                c[r][1] = _mm512_fmadd_ps(av, b1, c[r][1]);
                c[r][2] = _mm512_fmadd_ps(av, b2, c[r][2]);
            }
            Bp += NR;
            if ((k & (KSTEP - 1)) == KSTEP - 1)
                for (int e = 0; e < per && qi < npq; e++, qi++) _mm_prefetch(pq[qi], PFHINT);
        }
    }
    while (qi < npq) _mm_prefetch(pq[qi++], PFHINT);
    const int full = mr == MR && nr == NR;
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        float *cp = C + (size_t)r * N;
        const __m512 s = _mm512_set1_ps(sc ? sc[r] : 1.0f);
#pragma GCC unroll 3
        for (int v = 0; v < 3; v++) {
            const __mmask16 m = colmask(nr, v);
            __m512 t = c[r][v];
            if (full) {
                if (acc) t = _mm512_add_ps(t, _mm512_loadu_ps(cp + 16 * v));
                if (sc) t = _mm512_mul_ps(t, s);
                if (nt)
                    _mm512_stream_ps(cp + 16 * v, t);
                else
                    _mm512_storeu_ps(cp + 16 * v, t);
            } else {
                if (acc) t = _mm512_add_ps(t, _mm512_maskz_loadu_ps(m, cp + 16 * v));
                if (sc) t = _mm512_mul_ps(t, s);
                _mm512_mask_storeu_ps(cp + 16 * v, m, t);
            }
        }
    }
}

#elif defined(__AVX2__) && defined(__FMA__)
/* ---------------------------------------------------------------------------------------------
 * AVX2 + FMA path: the same design on 16 ymm registers.  Micro-kernel: an MR x NR = 4 x 24
 * register tile, 12 ymm accumulators; per k 3 ymm of the B micro-panel and 4 broadcasts of x,
 * 12 FMAs.  Edges: columns past N go through _mm256_maskload_ps / _mm256_maskstore_ps.
 * --------------------------------------------------------------------------------------------- */
#define MR 4
#define NV 3 /* ymm per row of the tile */
#define NR (8 * NV)
#define PFHINT _MM_HINT_T2
#define PREFETCH(p) _mm_prefetch((p), PFHINT)
#define SFENCE() _mm_sfence()

static const int32_t mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* lanes of vector v of an nr-wide tile row that hold columns < nr */
static inline __m256i colmask(int nr, int v) {
    int n = nr - 8 * v;
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_loadu_si256((const __m256i *)(mask_tab + 8 - n));
}

/* C[mr x nr] (+)= A[MR rows, kc] * B[kc x NR], each row then scaled by sc[r] (sc: the last K
 * block).  With src, B is read from src (row stride N, nr valid columns), its row k scaled by
 * gk[k] and packed into Bp on the way, otherwise read from Bp. */
static inline __attribute__((always_inline)) void ukr(int kc, const float *restrict A, int lda,
                                                      float *restrict Bp, float *restrict C,
                                                      int mr, int nr, int acc, int nt,
                                                      const float *restrict sc,
                                                      const float *restrict src,
                                                      const float *restrict gk,
                                                      const char *const *pq, int npq) {
    const float *a[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(r < mr ? r : mr - 1) * lda;
    __m256 c[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) c[r][v] = _mm256_setzero_ps();
    const int per = DIVUP(npq, DIVUP(kc, KSTEP));
    int qi = 0;
    __m256i m[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) m[v] = colmask(nr, v);
    if (src) { /* first use of this panel: read B in place, keep a packed copy */
        for (int k = 0; k < kc; k++) {
            __m256 b[NV];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) {
                b[v] = nr == NR ? _mm256_loadu_ps(src + 8 * v) : _mm256_maskload_ps(src + 8 * v, m[v]);
                b[v] = _mm256_mul_ps(b[v], _mm256_broadcast_ss(gk + k)); /* fold g in */
                _mm256_store_ps(Bp + 8 * v, b[v]);
            }
#pragma GCC unroll 8
            for (int r = 0; r < MR; r++) {
                __m256 av = _mm256_broadcast_ss(a[r] + k);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) c[r][v] = _mm256_fmadd_ps(av, b[v], c[r][v]);
            }
            Bp += NR;
            src += N;
            if ((k & (KSTEP - 1)) == KSTEP - 1)
                for (int e = 0; e < per && qi < npq; e++, qi++) _mm_prefetch(pq[qi], PFHINT);
        }
    } else {
        for (int k = 0; k < kc; k++) {
            __m256 b[NV];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) b[v] = _mm256_load_ps(Bp + 8 * v);
#pragma GCC unroll 8
            for (int r = 0; r < MR; r++) {
                __m256 av = _mm256_broadcast_ss(a[r] + k);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) c[r][v] = _mm256_fmadd_ps(av, b[v], c[r][v]);
            }
            Bp += NR;
            if ((k & (KSTEP - 1)) == KSTEP - 1)
                for (int e = 0; e < per && qi < npq; e++, qi++) _mm_prefetch(pq[qi], PFHINT);
        }
    }
    while (qi < npq) _mm_prefetch(pq[qi++], PFHINT);
    const int full = mr == MR && nr == NR;
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        float *cp = C + (size_t)r * N;
        const __m256 s = _mm256_set1_ps(sc ? sc[r] : 1.0f);
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            __m256 t = c[r][v];
            if (full) {
                if (acc) t = _mm256_add_ps(t, _mm256_loadu_ps(cp + 8 * v));
                if (sc) t = _mm256_mul_ps(t, s);
                if (nt)
                    _mm256_stream_ps(cp + 8 * v, t);
                else
                    _mm256_storeu_ps(cp + 8 * v, t);
            } else {
                if (acc) t = _mm256_add_ps(t, _mm256_maskload_ps(cp + 8 * v, m[v]));
                if (sc) t = _mm256_mul_ps(t, s);
                _mm256_maskstore_ps(cp + 8 * v, m[v], t);
            }
        }
    }
}

#else
/* ---------------------------------------------------------------------------------------------
 * Portable path (no intrinsics; aarch64, x86 without AVX2, ...): GCC vector extensions, 4-wide
 * float vectors the compiler maps onto NEON or SSE (FMA where the target has it).  Micro-kernel
 * MR x NR with NR = 4 * NV: 8 x 12 where there are 32 vector registers (aarch64), 4 x 12
 * elsewhere.  The panel is packed (zero padded) before its first use; C edges go through a
 * small buffer.
 * --------------------------------------------------------------------------------------------- */
typedef float v4 __attribute__((vector_size(16)));
#if defined(__aarch64__)
#define MR 8
#else
#define MR 4
#endif
#define NV 3
#define NR (4 * NV)
#define PREFETCH(p) __builtin_prefetch((p), 0, 1)
#define SFENCE() ((void)0)

static inline v4 loadu4(const float *p) {
    v4 r;
    memcpy(&r, p, sizeof r);
    return r;
}

static inline void storeu4(float *p, v4 x) { memcpy(p, &x, sizeof x); }

/* C[mr x nr] (+)= A[MR rows, kc] * B[kc x NR], each row then scaled by sc[r] (sc: the last K
 * block).  With src, B (row stride N, nr valid columns), its row k scaled by gk[k], is first
 * packed into Bp, zero padded. */
static inline __attribute__((always_inline)) void ukr(int kc, const float *restrict A, int lda,
                                                      float *restrict Bp, float *restrict C,
                                                      int mr, int nr, int acc, int nt,
                                                      const float *restrict sc,
                                                      const float *restrict src,
                                                      const float *restrict gk,
                                                      const char *const *pq, int npq) {
    (void)nt;
    if (src) {
        float *d = Bp;
        for (int k = 0; k < kc; k++, d += NR, src += N) {
            for (int j = 0; j < nr; j++) d[j] = src[j] * gk[k]; /* fold g in */
            for (int j = nr; j < NR; j++) d[j] = 0.0f;
        }
    }
    const float *a[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(r < mr ? r : mr - 1) * lda;
    v4 c[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) c[r][v] = (v4){0.0f, 0.0f, 0.0f, 0.0f};
    const int per = DIVUP(npq, DIVUP(kc, KSTEP));
    int qi = 0;
    for (int k0 = 0; k0 < kc; k0 += KSTEP) {
        const int k1 = k0 + KSTEP < kc ? k0 + KSTEP : kc;
        for (int k = k0; k < k1; k++) {
            v4 b[NV];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) b[v] = *(const v4 *)(Bp + 4 * v);
#pragma GCC unroll 8
            for (int r = 0; r < MR; r++) {
                const float x = a[r][k];
                const v4 av = {x, x, x, x};
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) c[r][v] += av * b[v];
            }
            Bp += NR;
        }
        for (int e = 0; e < per && qi < npq; e++, qi++) PREFETCH(pq[qi]);
    }
    while (qi < npq) PREFETCH(pq[qi++]);
    for (int r = 0; r < mr; r++) {
        float t[NR];
        float *cp = C + (size_t)r * N;
        const float s = sc ? sc[r] : 1.0f;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) storeu4(t + 4 * v, c[r][v]);
        for (int j = 0; j < nr; j++) cp[j] = (acc ? cp[j] + t[j] : t[j]) * s;
    }
}

#endif

/* the K block: from KCMAX, or the MR x KC strip of y in half of L1 (128 rows at least) */
#if KCMAX > 0
#define KCM KCMAX
#else
#define KCM_L1 (ACCELOPT_L1D_BYTES / 2 / (4 * MR) / 16 * 16)
#define KCM (KCM_L1 > 128 ? KCM_L1 : 128)
#endif
#define EPS 1e-5f

/* y[0..n) = a[0..n) + b[0..n), returns the sum of y^2; vectorized at the target's own width (an
 * omp simd reduction): GCC vectors of a fixed 16 lanes went through the stack on AVX2 (2 ymm
 * each), which made this pass, redone per strip for every column chunk, cost some 15% there */
static float add_sumsq(const float *restrict a, const float *restrict b, float *restrict y, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int k = 0; k < n; k++) {
        const float u = a[k] + b[k];
        y[k] = u;
        s += u * u;
    }
    return s;
}

/* Y[r, 0:kc) = x + z for rows [0, mr) of the strip at x and z (row stride K), Y's row stride
 * ldy.  With ss (a thread's first chunk): ss[r] (+)= the row's sum of y^2, and at the last K
 * block ss[r] becomes 1 / sqrt(ss[r] / K + eps) */
static void strip_build(const float *restrict x, const float *restrict z, int mr, int kc,
                        float *restrict Y, int ldy, float *restrict ss, int first, int last) {
    for (int r = 0; r < mr; r++) {
        float s = add_sumsq(x + (size_t)r * K, z + (size_t)r * K, Y + (size_t)r * ldy, kc);
        if (!ss) continue;
        s += first ? 0.0f : ss[r];
        ss[r] = last ? 1.0f / sqrtf(s / (float)K + EPS) : s;
    }
}

/* chunks of panels: at most cmax panels each, their count a multiple of nth (each thread gets
 * as many), as equal as possible; returns panels per chunk */
static int chunk_panels(int npan, int cmax, int nth) {
    int nchunk = DIVUP(npan, cmax);
    nchunk = DIVUP(nchunk, nth) * nth;
    if (nchunk > npan) nchunk = npan;
    return DIVUP(npan, nchunk);
}

/* queue the lines of rows [0, mr) of a strip of x or z (columns [0, kc), row stride K) */
static inline int queue_strip(const char **pq, int npq, const float *p, int mr, int kc) {
    for (int r = 0; r < mr; r++) {
        const char *a = (const char *)(p + (size_t)r * K);
        const char *e = (const char *)(p + (size_t)r * K + kc);
        for (a = (const char *)((uintptr_t)a & ~(uintptr_t)63); a < e; a += 64) {
            if (npq < PQMAX)
                pq[npq++] = a;
            else
                PREFETCH(a);
        }
    }
    return npq;
}

void kernel(const float *restrict x, const float *restrict z, const float *restrict g,
            const float *restrict w, float *restrict out) {
    const int nkb = DIVUP(K, KCM);
    const int kcb = DIVUP(DIVUP(K, nkb), 16) * 16; /* K block, a multiple of 16 */
    const int npan = DIVUP(N, NR);                  /* NR-wide column panels */
    int nth = omp_get_max_threads();
    if (nth > npan) nth = npan;
    if (nth < 1) nth = 1;
    /* column chunks of cpp panels, the block (kcb x cpp * NR) in half of L2 unless NCB says */
    int cmax = NCB > 0 ? NCB / NR : (int)((size_t)ACCELOPT_L2_BYTES / 2 / ((size_t)4 * kcb * NR));
    if (cmax < 1) cmax = 1;
    const int cpp = chunk_panels(npan, cmax, nth);
    const int nchunk = DIVUP(npan, cpp);
    const size_t bsz = (size_t)kcb * cpp * NR;      /* packed block */
    const size_t ysz = (size_t)MR * kcb;            /* the y strip */
    const size_t rsz = (size_t)DIVUP(M, 16) * 16;   /* row sums, then inv_rms */
    const size_t per = bsz + ysz + rsz;
    float *buf = (float *)aligned_alloc(64, per * sizeof(float) * nth);
    const int nt_ok = (N % 16 == 0) && (((uintptr_t)out & 63) == 0);
    int claimed = 0; /* chunk t is thread t's first; the others are claimed one ahead */

#pragma omp parallel num_threads(nth)
    {
        float *Bp = buf + per * omp_get_thread_num();
        float *Y = Bp + bsz, *inv = Y + ysz;
        const int P = omp_get_num_threads();
        int ch = omp_get_thread_num(), first = 1;
        const char *pq[PQMAX];
        while (ch < nchunk) {
            const int chn = P + __atomic_fetch_add(&claimed, 1, __ATOMIC_RELAXED);
            const int jc = ch * cpp * NR;
            const int nc = N - jc < cpp * NR ? N - jc : cpp * NR;
            for (int pc = 0; pc < K; pc += kcb) {
                int kc = K - pc < kcb ? K - pc : kcb;
                int acc = pc > 0, last = pc + kc >= K;
                /* the block read next: (jc, pc + kc) or the first K block of the next chunk;
                 * prefetched during the last PFFRAC-th of this block's strips */
                int pn = pc + kc, jn = jc, ncn = nc;
                if (pn >= K) {
                    pn = 0;
                    jn = chn < nchunk ? chn * cpp * NR : N;
                    ncn = N - jn < cpp * NR ? N - jn : cpp * NR;
                }
                const int kcn = K - pn < kcb ? K - pn : kcb;
                const int nstr = DIVUP(M, MR), s0 = nstr - DIVUP(nstr, PFFRAC);
                const int pf_rows = jn < N ? DIVUP(kcn, nstr - s0) : 0;
                const int pf_lines = DIVUP(ncn, 16);
                for (int i = 0, s = 0; i < M; i += MR, s++) {
                    int mr = M - i < MR ? M - i : MR;
                    const size_t xo = (size_t)i * K + pc;
                    strip_build(x + xo, z + xo, mr, kc, Y, kcb, first ? inv + i : NULL, pc == 0, last);
                    /* the prefetches: the next strip's x and z, then the next block of w */
                    int npq = 0;
                    if (i + MR < M) {
                        const int mrn = M - i - MR < MR ? M - i - MR : MR;
                        npq = queue_strip(pq, npq, x + xo + (size_t)MR * K, mrn, kc);
                        npq = queue_strip(pq, npq, z + xo + (size_t)MR * K, mrn, kc);
                    }
                    if (s >= s0)
                        for (int r = (s - s0) * pf_rows; r < (s - s0 + 1) * pf_rows && r < kcn; r++) {
                            const char *src = (const char *)(w + (size_t)(pn + r) * N + jn);
                            for (int l = 0; l < pf_lines; l++) {
                                if (npq < PQMAX)
                                    pq[npq++] = src + 64 * l;
                                else
                                    PREFETCH(src + 64 * l);
                            }
                        }
                    const int npan_c = DIVUP(nc, NR), qper = DIVUP(npq, npan_c);
                    const float *sc = last ? inv + i : NULL;
                    for (int j = 0, jq = 0; j < nc; j += NR, jq += qper) {
                        const int q0 = jq < npq ? jq : npq, q1 = jq + qper < npq ? jq + qper : npq;
                        int nr = nc - j < NR ? nc - j : NR;
                        float *C = out + (size_t)i * N + jc + j;
                        float *Bj = Bp + (size_t)(j / NR) * kc * NR;
                        const float *src = i == 0 ? w + (size_t)pc * N + jc + j : NULL;
                        if (last && nt_ok)
                            ukr(kc, Y, kcb, Bj, C, mr, nr, acc, 1, sc, src, g + pc, pq + q0, q1 - q0);
                        else
                            ukr(kc, Y, kcb, Bj, C, mr, nr, acc, 0, sc, src, g + pc, pq + q0, q1 - q0);
                    }
                }
            }
            first = 0;
            ch = chn;
        }
        SFENCE();
    }
    free(buf);
}
