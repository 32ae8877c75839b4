/* bmm expert: out[b] = lhs[b] @ rhs[b] for b < B; lhs [B, M, K], rhs [B, K, N], out [B, M, N],
 * float32 row-major.  K is small (64): each output tile is one short K loop, so the work is
 * B*M*N tiles of 2K flops each and the M*N*B output (33 MB for the cpu workload) is the only
 * big stream.  The matmul expert's micro-kernels and B blocks, with batches x column chunks as
 * the units of work.
 * Three code paths, chosen by the compiler's target:
 *  - AVX-512 (__AVX512F__): an 8 x 48 register tile, 24 zmm accumulators; per k one row of the
 *    48-wide B micro-panel (3 zmm) and 8 broadcasts of A, 24 FMAs;
 *  - AVX2 + FMA (__AVX2__ and __FMA__): a 4 x 24 tile, 12 ymm accumulators;
 *  - portable (anything else, aarch64 included): GCC vector extensions (4-wide), an 8 x 12
 *    (aarch64) or 4 x 12 tile.
 * All three share the driver (kernel() at the end).
 * Work items: (batch, column chunk of NCB columns); items are handed out dynamically (item t is
 * thread t's first, the others are claimed one ahead so that they can be prefetched), in batch
 * order, so the two threads work on the same batch and its A stays in L2/L3.  There are enough
 * items (at least 16 per thread) for the hand-out to even out the threads.
 * Per item and K block (one for K = 64): the chunk's KC x NCB block of rhs[b] is packed into a
 * per-thread buffer (fused into the first strip: its micro-kernel reads B in place and stores
 * the packed copy) that stays in L2 while all M/MR strips of lhs[b] pass; A is read in place
 * through MR row pointers (a strip is MR*K contiguous floats).
 * Prefetch: the next strip's A lines, and during the last PFFRAC-th of the strips the block the
 * thread reads next, queued per strip and issued a few every KSTEP k-steps inside the
 * micro-kernel, so the trips to memory overlap the FMAs.
 * Output: with K in one block each C tile is written once, with streaming stores (which do not
 * read the lines first nor evict A and B from the caches) when the rows are 64-byte aligned;
 * otherwise C is accumulated in place over the K blocks.  On the 2-core Zen 4 VM this runs at
 * about 88% of the FMA peak, the output leaving at about 6.5 GB/s; a plain streaming-store
 * test wrote 4-8 GB/s on that (busy) VM, so the output writes are the likely bound.
 * Edges: rows past M reuse the last row's pointer (their results are dropped), columns past N
 * are masked.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <omp.h>

#if defined(__AVX512F__)
#define MR 8
#define NR 48

#ifndef PFHINT
#define PFHINT _MM_HINT_T2
#endif
#ifndef PFFRAC
#define PFFRAC 4 /* tune: 2 4 8 */
#endif
#ifndef KSTEP
#define KSTEP 32 /* tune: 16 32 64 */ /* a power of two */
#endif
#define PQMAX 1024
#define DIVUP(a, b) (((a) + (b)-1) / (b))

static inline __mmask16 colmask(int nr, int v) {
    int n = nr - 16 * v;
    if (n >= 16) return (__mmask16)0xFFFF;
    if (n <= 0) return 0;
    return (__mmask16)((1u << n) - 1u);
}

/* C[mr x nr] (+)= A[8 rows, kc] * B[kc x 48]; with src, B is read from src (row stride N, nr
 * valid columns) and packed into Bp on the way, otherwise read from Bp */
static inline __attribute__((always_inline)) void ukr(int kc, const float *restrict A, int lda,
                                                      float *restrict Bp, float *restrict C,
                                                      int mr, int nr, int acc, int nt,
                                                      const float *restrict src,
                                                      const char *const *pq, int npq) {
    const float *a[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(r < mr ? r : mr - 1) * lda;
    __m512 c[MR][3];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        c[r][0] = _mm512_setzero_ps();
        c[r][1] = _mm512_setzero_ps();
        c[r][2] = _mm512_setzero_ps();
    }
    /* the prefetches of this call are spread over its k loop, a few every KSTEP steps */
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
    if (mr == MR && nr == NR) {
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            float *cp = C + (size_t)r * N;
            if (acc) {
                c[r][0] = _mm512_add_ps(c[r][0], _mm512_loadu_ps(cp));
                c[r][1] = _mm512_add_ps(c[r][1], _mm512_loadu_ps(cp + 16));
                c[r][2] = _mm512_add_ps(c[r][2], _mm512_loadu_ps(cp + 32));
            }
            if (nt) {
                _mm512_stream_ps(cp, c[r][0]);
                _mm512_stream_ps(cp + 16, c[r][1]);
                _mm512_stream_ps(cp + 32, c[r][2]);
            } else {
                _mm512_storeu_ps(cp, c[r][0]);
                _mm512_storeu_ps(cp + 16, c[r][1]);
                _mm512_storeu_ps(cp + 32, c[r][2]);
            }
        }
    } else {
        __mmask16 m0 = colmask(nr, 0), m1 = colmask(nr, 1), m2 = colmask(nr, 2);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            if (r < mr) {
                float *cp = C + (size_t)r * N;
                if (acc) {
                    c[r][0] = _mm512_add_ps(c[r][0], _mm512_maskz_loadu_ps(m0, cp));
                    c[r][1] = _mm512_add_ps(c[r][1], _mm512_maskz_loadu_ps(m1, cp + 16));
                    c[r][2] = _mm512_add_ps(c[r][2], _mm512_maskz_loadu_ps(m2, cp + 32));
                }
                _mm512_mask_storeu_ps(cp, m0, c[r][0]);
                _mm512_mask_storeu_ps(cp + 16, m1, c[r][1]);
                _mm512_mask_storeu_ps(cp + 32, m2, c[r][2]);
            }
        }
    }
}
#define PREFETCH(p) _mm_prefetch((p), PFHINT)
#define SFENCE() _mm_sfence()

#elif defined(__AVX2__) && defined(__FMA__)
/* ---------------------------------------------------------------------------------------------
 * AVX2 + FMA path: the same design on 16 ymm registers.  Micro-kernel: an MR x NR = 4 x 24
 * register tile, 12 ymm accumulators; per k 3 ymm of the B micro-panel and 4 broadcasts of A,
 * 12 FMAs (as fast as 6 x 16 here, with fewer loads and no wasted rows when 4 divides M).
 * Blocking, packing, prefetching and threads as in the header, with 24-wide micro-panels (8 per
 * 192-column block).
 * Edges: columns past N go through _mm256_maskload_ps / _mm256_maskstore_ps.
 * --------------------------------------------------------------------------------------------- */
#ifndef MR
#define MR 4
#endif
#ifndef NV
#define NV 3 /* ymm per row of the tile */
#endif
#define NR (8 * NV)

#ifndef PFHINT
#define PFHINT _MM_HINT_T2
#endif
#ifndef PFFRAC
#define PFFRAC 4 /* tune: 2 4 8 */
#endif
#ifndef KSTEP
#define KSTEP 32 /* tune: 16 32 64 */ /* a power of two */
#endif
#define PQMAX 1024
#define DIVUP(a, b) (((a) + (b)-1) / (b))

static const int32_t mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* lanes of vector v of an nr-wide tile row that hold columns < nr */
static inline __m256i colmask(int nr, int v) {
    int n = nr - 8 * v;
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_loadu_si256((const __m256i *)(mask_tab + 8 - n));
}

/* C[mr x nr] (+)= A[MR rows, kc] * B[kc x NR]; with src, B is read from src (row stride N, nr
 * valid columns) and packed into Bp on the way, otherwise read from Bp */
static inline __attribute__((always_inline)) void ukr(int kc, const float *restrict A, int lda,
                                                      float *restrict Bp, float *restrict C,
                                                      int mr, int nr, int acc, int nt,
                                                      const float *restrict src,
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
    if (src) { /* first use of this panel: read B in place, keep a packed copy */
        __m256i m[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) m[v] = colmask(nr, v);
        for (int k = 0; k < kc; k++) {
            __m256 b[NV];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) {
                b[v] = nr == NR ? _mm256_loadu_ps(src + 8 * v) : _mm256_maskload_ps(src + 8 * v, m[v]);
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
    if (mr == MR && nr == NR) {
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            float *cp = C + (size_t)r * N;
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) {
                if (acc) c[r][v] = _mm256_add_ps(c[r][v], _mm256_loadu_ps(cp + 8 * v));
                if (nt)
                    _mm256_stream_ps(cp + 8 * v, c[r][v]);
                else
                    _mm256_storeu_ps(cp + 8 * v, c[r][v]);
            }
        }
    } else {
        __m256i m[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) m[v] = colmask(nr, v);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            if (r < mr) {
                float *cp = C + (size_t)r * N;
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) {
                    if (acc) c[r][v] = _mm256_add_ps(c[r][v], _mm256_maskload_ps(cp + 8 * v, m[v]));
                    _mm256_maskstore_ps(cp + 8 * v, m[v], c[r][v]);
                }
            }
        }
    }
}
#define PREFETCH(p) _mm_prefetch((p), PFHINT)
#define SFENCE() _mm_sfence()

#else
/* ---------------------------------------------------------------------------------------------
 * Portable path (no intrinsics; aarch64, x86 without AVX2, ...): GCC vector extensions, 4-wide
 * float vectors the compiler maps onto NEON or SSE (FMA where the target has it).  Same blocking,
 * threads and prefetches (__builtin_prefetch); micro-kernel MR x NR with NR = 4 * NV: 8 x 12
 * where there are 32 vector registers (aarch64), 4 x 12 elsewhere (16 registers).  The panel is
 * packed before its first use instead of during it; C edges go through a small buffer.
 * --------------------------------------------------------------------------------------------- */
typedef float v4 __attribute__((vector_size(16)));
#ifndef MR
#if defined(__aarch64__)
#define MR 8
#define NV 3
#else
#define MR 4
#define NV 3
#endif
#endif
#define NR (4 * NV)
#ifndef PFFRAC
#define PFFRAC 4 /* tune: 2 4 8 */
#endif
#ifndef KSTEP
#define KSTEP 32 /* tune: 16 32 64 */ /* a power of two */
#endif
#define PQMAX 1024
#define DIVUP(a, b) (((a) + (b)-1) / (b))
#define PREFETCH(p) __builtin_prefetch((p), 0, 1)
#define SFENCE() ((void)0)

static inline v4 loadu4(const float *p) {
    v4 r;
    memcpy(&r, p, sizeof r);
    return r;
}

static inline void storeu4(float *p, v4 x) { memcpy(p, &x, sizeof x); }

/* C[mr x nr] (+)= A[MR rows, kc] * B[kc x NR]; with src, B (row stride N, nr valid columns)
 * is first packed into Bp, zero padded */
static inline __attribute__((always_inline)) void ukr(int kc, const float *restrict A, int lda,
                                                      float *restrict Bp, float *restrict C,
                                                      int mr, int nr, int acc, int nt,
                                                      const float *restrict src,
                                                      const char *const *pq, int npq) {
    (void)nt;
    if (src) {
        float *d = Bp;
        for (int k = 0; k < kc; k++, d += NR, src += N) {
            for (int j = 0; j < nr; j++) d[j] = src[j];
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
    if (nr == NR) {
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            if (r < mr) {
                float *cp = C + (size_t)r * N;
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++)
                    storeu4(cp + 4 * v, acc ? c[r][v] + loadu4(cp + 4 * v) : c[r][v]);
            }
        }
    } else {
        for (int r = 0; r < mr; r++) {
            float t[NR];
            float *cp = C + (size_t)r * N;
            for (int v = 0; v < NV; v++) storeu4(t + 4 * v, c[r][v]);
            for (int j = 0; j < nr; j++) cp[j] = acc ? cp[j] + t[j] : t[j];
        }
    }
}

#endif

/* Cache blocking, from the per-core cache sizes the build defines (ACCELOPT_L1D_BYTES,
 * ACCELOPT_L2_BYTES, from sysfs); a cross build defines neither: then 32 KiB and 1 MiB.
 * KCMAX (0 = derived): the longest K block, the largest multiple of 16 whose MR x KC strip of A
 * takes at most 5/8 of L1d (640 for MR = 8 and 32 KiB): the strip is re-read by every
 * micro-panel of the block, and the rest of L1d is left to the B rows streaming past it.
 * NCB (0 = derived): the columns of a packed B block, the most NR-wide micro-panels whose
 * kc x NCB block fills at most half of L2 (the other half holds the next block coming in by
 * prefetch and the A strips), then fewer while there are under 16 work items per thread (192
 * for the cpu workload, 5 x 1280 x 1280, K = 64, 2 threads).  Given, a multiple of NR. */
#ifndef ACCELOPT_L1D_BYTES
#define ACCELOPT_L1D_BYTES 32768
#endif
#ifndef ACCELOPT_L2_BYTES
#define ACCELOPT_L2_BYTES 1048576
#endif
#ifndef KCMAX
#define KCMAX 0 /* tune: 0 256 384 512 640 768 1024 */
#endif
#ifndef NCB
#define NCB 0 /* tune: 0 96 192 288 384 */
#endif
#if KCMAX > 0
#define KC_LIMIT KCMAX
#else
#define KC_LIMIT (ACCELOPT_L1D_BYTES * 5 / 8 / (MR * 4) / 16 * 16)
#endif

/* the column chunks: cpp micro-panels each (one packed B block of kc rows), as many as L2
 * takes, then fewer until every thread has at least 16 items to draw from */
static int chunk_panels(int kc, int npan, int nth) {
    int cpp = NCB > 0 ? NCB / NR : (int)((ACCELOPT_L2_BYTES / 2) / ((size_t)kc * NR * sizeof(float)));
    if (cpp > npan) cpp = npan;
    if (NCB == 0)
        while (cpp > 1 && B * DIVUP(npan, cpp) < 16 * nth) cpp--;
    return cpp > 0 ? cpp : 1;
}

/* queue (or issue, when the queue is full) the prefetch of rows r0 <= r < r1 of a matrix of
 * row stride ld: cols floats from p on each */
static int queue_rows(const char **pq, int npq, const float *p, size_t ld, int r0, int r1,
                      int cols) {
    const int lines = DIVUP(cols, 16);
    for (int r = r0; r < r1; r++)
        for (int l = 0; l < lines; l++) {
            const char *q = (const char *)(p + (size_t)r * ld) + 64 * l;
            if (npq < PQMAX)
                pq[npq++] = q;
            else
                PREFETCH(q);
        }
    return npq;
}

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
    const int nkb = DIVUP(K, KC_LIMIT);
    const int kcb = DIVUP(DIVUP(K, nkb), 16) * 16; /* K block, a multiple of 16 */
    const int npan = DIVUP(N, NR);                  /* NR-wide column panels */
    const int nstr = DIVUP(M, MR);                  /* MR-row strips */
    int nth = omp_get_max_threads();
    if (nth > B * npan) nth = B * npan;
    if (nth < 1) nth = 1;
    const int cpp = chunk_panels(kcb, npan, nth);
    const int nchk = DIVUP(npan, cpp), nitem = B * nchk; /* item t: batch t / nchk */
    const size_t bsz = (size_t)kcb * cpp * NR;
    float *buf = (float *)aligned_alloc(64, bsz * sizeof(float) * nth);
    const int nt_ok = (N % 16 == 0) && (((uintptr_t)out & 63) == 0);
    int claimed = 0; /* item t is thread t's first; the others are claimed one ahead */

#pragma omp parallel num_threads(nth)
    {
        float *Bp = buf + bsz * omp_get_thread_num();
        const int P = omp_get_num_threads();
        int it = omp_get_thread_num();
        const char *pq[PQMAX];
        while (it < nitem) {
            const int itn = P + __atomic_fetch_add(&claimed, 1, __ATOMIC_RELAXED);
            const int b = it / nchk, jc = (it % nchk) * cpp * NR;
            const int nc = N - jc < cpp * NR ? N - jc : cpp * NR;
            const float *lhs_b = lhs + (size_t)b * M * K, *rhs_b = rhs + (size_t)b * K * N;
            float *out_b = out + (size_t)b * M * N;
            for (int pc = 0; pc < K; pc += kcb) {
                const int kc = K - pc < kcb ? K - pc : kcb;
                const int acc = pc > 0, last = pc + kc >= K;
                /* the block read next: (b, jc, pc + kc) or the first K block of item itn */
                int pn = pc + kc, bn = b, jn = jc;
                if (pn >= K) {
                    pn = 0;
                    bn = itn < nitem ? itn / nchk : B;
                    jn = itn < nitem ? (itn % nchk) * cpp * NR : 0;
                }
                const int kcn = K - pn < kcb ? K - pn : kcb;
                const int ncn = N - jn < cpp * NR ? N - jn : cpp * NR;
                const float *next = bn < B ? rhs + (size_t)bn * K * N + (size_t)pn * N + jn : NULL;
                const int s0 = nstr - DIVUP(nstr, PFFRAC), pf_rows = DIVUP(kcn, nstr - s0);
                for (int i = 0, s = 0; i < M; i += MR, s++) {
                    const int mr = M - i < MR ? M - i : MR;
                    const float *A = lhs_b + (size_t)i * K + pc;
                    int npq = 0;
                    if (i + MR < M) /* the next strip of A */
                        npq = queue_rows(pq, npq, A + (size_t)MR * K, K, 0,
                                         M - i - MR < MR ? M - i - MR : MR, kc);
                    if (s >= s0 && next) {
                        const int r0 = (s - s0) * pf_rows, r1 = r0 + pf_rows;
                        npq = queue_rows(pq, npq, next, N, r0, r1 < kcn ? r1 : kcn, ncn);
                    }
                    const int qper = DIVUP(npq, DIVUP(nc, NR));
                    for (int j = 0, jq = 0; j < nc; j += NR, jq += qper) {
                        const int q0 = jq < npq ? jq : npq, q1 = jq + qper < npq ? jq + qper : npq;
                        const int nr = nc - j < NR ? nc - j : NR;
                        float *C = out_b + (size_t)i * N + jc + j;
                        float *Bj = Bp + (size_t)(j / NR) * kc * NR;
                        const float *src = i == 0 ? rhs_b + (size_t)pc * N + jc + j : NULL;
                        if (last && nt_ok)
                            ukr(kc, A, K, Bj, C, mr, nr, acc, 1, src, pq + q0, q1 - q0);
                        else
                            ukr(kc, A, K, Bj, C, mr, nr, acc, 0, src, pq + q0, q1 - q0);
                    }
                }
            }
            it = itn;
        }
        SFENCE();
    }
    free(buf);
}
