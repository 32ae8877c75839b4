/* lora expert: out[M, N] = x[M, K] @ w[K, N] + (x @ a[K, R]) @ b[R, N], float32 row-major.
 *
 * The adapter folds into the dense GEMM: out = [x | t] @ [w ; b] with t = x @ a (M x R).
 * So t is computed first (2MKR flops, a few % of the work), and then one GEMM whose K loop runs
 * over w's K rows and then over b's R rows, both accumulating into the same registers: out is
 * written once, with no second pass over it and no [x | t] copy.
 *
 * Three code paths, chosen by the compiler's target; they differ only in the vector width VL and
 * the register tile MR x NR (NR = NV * VL), the code is shared (GCC vector extensions, which
 * compile to FMAs on zmm / ymm / NEON registers, or mul + add where there is no FMA):
 *  - AVX-512 (__AVX512F__): 8 x 48 tile, 24 zmm accumulators (per k: 3 zmm of B, 8 broadcasts
 *    of A, 24 FMAs); streaming stores for out;
 *  - AVX2 + FMA (__AVX2__ and __FMA__): 4 x 24 tile, 12 ymm accumulators; streaming stores;
 *  - portable (anything else, aarch64 included): 4-wide vectors, 8 x 12 where there are 32
 *    vector registers (aarch64), 4 x 12 elsewhere; plain stores.
 *
 * Phase 1, t = x @ a: a is copied into a zero-padded K x RP array (RP: R rounded up to whole
 *   vectors); groups of TM rows x TV vectors of t are accumulated in registers; t goes to a
 *   scratch [M x RP] array (row stride RP) that every thread then reads (barrier).
 * Phase 2, the GEMM (as matmul/expert.c): B = [w ; b] is cut into column chunks of at most NCB
 *   columns (whole NR-wide panels) and K blocks; the last K block also holds b's R rows.  A
 *   chunk's block is packed into per-thread, zero-padded KC x NR panels that stay in L2 (its
 *   size is BBYTES, by default half the L2) while all M/MR strips of x stream past; A is read
 *   in place through MR row pointers (an MR x KC strip stays in L1).  The micro-kernel runs k
 *   over the x strip, then (last K block) over the t strip against the packed b rows.
 *   Chunks are handed out dynamically (chunk p is thread p's first, the others are claimed one
 *   ahead); the block a thread reads next is prefetched into L2 during the last 1/PFFRAC of the
 *   current block's strips, a few lines every KSTEP k-steps inside the micro-kernel, so the
 *   trip to DRAM overlaps the FMAs (the weights are cold: they come from DRAM on every call).
 *   With K in one block each tile of out is written once.
 * Edges: rows past M reuse the last row's pointer (their results are dropped), columns past N
 * are zero in the packed panels and the tile goes through a small buffer.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef ACCELOPT_L2_BYTES
#define ACCELOPT_L2_BYTES (1 << 20) /* per-core L2 when the build does not say (cross builds) */
#endif

#if defined(__AVX512F__)
#define VL 16
#ifndef MR
#define MR 8
#endif
#define NV 3
#define STREAM(p, v) _mm512_stream_ps((p), (__m512)(v))
#define SFENCE() _mm_sfence()
#elif defined(__AVX2__) && defined(__FMA__)
#define VL 8
#ifndef MR
#define MR 4
#endif
#define NV 3
#define STREAM(p, v) _mm256_stream_ps((p), (__m256)(v))
#define SFENCE() _mm_sfence()
#else
#define VL 4
#ifndef MR
#if defined(__aarch64__)
#define MR 8
#else
#define MR 4
#endif
#endif
#define NV 3
#define STREAM(p, v) (*(vf *)(p) = (v))
#define SFENCE() ((void)0)
#endif

typedef float vf __attribute__((vector_size(VL * 4)));                /* aligned vector */
typedef float vfu __attribute__((vector_size(VL * 4), aligned(4)));   /* unaligned access */
#define NR (VL * NV)

#ifndef NCB
#define NCB 192 /* tune: 96 192 288 384 */ /* columns per chunk (rounded to whole panels) */
#endif
#ifndef BBYTES
#define BBYTES 0 /* tune: 0 262144 393216 524288 786432 */ /* packed block; 0: half the L2 */
#endif
#ifndef PFFRAC
#define PFFRAC 4 /* tune: 2 4 8 */
#endif
#ifndef KSTEP
#define KSTEP 32 /* tune: 16 32 64 */ /* a power of two */
#endif
#define PQMAX 1024
#define DIVUP(a, b) (((a) + (b) - 1) / (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define PREFETCH(p) __builtin_prefetch((p), 0, 1) /* prefetcht2 on x86: into L2 */

/* t = x @ a: RV vectors per row of t, in groups of TV vectors x TM rows of accumulators */
#define RV DIVUP(R, VL)
#define TV (RV < 4 ? RV : 4)
#define RP (DIVUP(RV, TV) * TV * VL) /* padded row of t and of the a copy */
#define TM (TV >= 4 ? 3 : TV == 3 ? 4 : TV == 2 ? 6 : 8)

/* T[i0 .. i0 + TM rows, v0 .. v0 + TV vectors] = x rows @ ap (K x RP, zero padded) */
static inline void t_tile(const float *restrict x, const float *restrict ap, float *restrict T,
                          int i0, int v0) {
    const float *xr[TM];
    for (int r = 0; r < TM; r++) xr[r] = x + (size_t)MIN(i0 + r, M - 1) * K;
    vf c[TM][TV];
#pragma GCC unroll 8
    for (int r = 0; r < TM; r++)
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) c[r][v] = (vf){0};
    const float *bp = ap + v0 * VL;
    for (int k = 0; k < K; k++, bp += RP) {
        vf bv[TV];
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) bv[v] = *(const vf *)(bp + v * VL);
#pragma GCC unroll 8
        for (int r = 0; r < TM; r++)
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++) c[r][v] += xr[r][k] * bv[v];
    }
    for (int r = 0; r < TM && i0 + r < M; r++)
        for (int v = 0; v < TV; v++) *(vf *)(T + (size_t)(i0 + r) * RP + (v0 + v) * VL) = c[r][v];
}

/* C[mr x nr] (+)= A[MR rows, kc] @ Bp[kc x NR] (+ Tr[MR rows, R] @ Bp[kc.. kc + R] when Tr);
 * pq: npq lines to prefetch, a few every KSTEP k-steps */
static inline __attribute__((always_inline)) void ukr(int kc, const float *restrict A,
                                                      const float *restrict Tr,
                                                      const float *restrict Bp,
                                                      float *restrict C, int mr, int nr, int acc,
                                                      int nt, const char *const *pq, int npq) {
    vf c[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) c[r][v] = (vf){0};
    const int per = DIVUP(npq, DIVUP(kc, KSTEP));
    int qi = 0;
    const float *a[MR];
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(r < mr ? r : mr - 1) * K;
    for (int k0 = 0; k0 < kc; k0 += KSTEP) {
        const int k1 = MIN(k0 + KSTEP, kc);
        for (int k = k0; k < k1; k++) {
            vf b[NV];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) b[v] = *(const vf *)(Bp + v * VL);
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) c[r][v] += a[r][k] * b[v];
            Bp += NR;
        }
        for (int e = 0; e < per && qi < npq; e++, qi++) PREFETCH(pq[qi]);
    }
    while (qi < npq) PREFETCH(pq[qi++]);
    if (Tr) { /* the adapter: t strip @ the packed b rows */
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) a[r] = Tr + (size_t)(r < mr ? r : mr - 1) * RP;
        for (int k = 0; k < R; k++) {
            vf b[NV];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) b[v] = *(const vf *)(Bp + v * VL);
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) c[r][v] += a[r][k] * b[v];
            Bp += NR;
        }
    }
    if (mr == MR && nr == NR) {
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            float *cp = C + (size_t)r * N;
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) {
                if (acc) c[r][v] += *(const vfu *)(cp + v * VL);
                if (nt)
                    STREAM(cp + v * VL, c[r][v]);
                else
                    *(vfu *)(cp + v * VL) = c[r][v];
            }
        }
    } else { /* edge tile: through a buffer, only the valid part */
        for (int r = 0; r < mr; r++) {
            float tb[NR];
            float *cp = C + (size_t)r * N;
            memcpy(tb, c[r], sizeof tb);
            for (int j = 0; j < nr; j++) cp[j] = acc ? cp[j] + tb[j] : tb[j];
        }
    }
}

/* row r of the K block starting at pc with kc rows (then b's R rows when last) */
static inline const float *brow(const float *w, const float *b, int pc, int kc, int r) {
    return r < kc ? w + (size_t)(pc + r) * N : b + (size_t)(r - kc) * N;
}

/* pack rows [0, nrows) of the block (columns jc .. jc + nc) into zero-padded NR-wide panels,
 * panel p at Bp + p * nrows * NR */
static void pack_block(const float *restrict w, const float *restrict b, int pc, int kc,
                       int nrows, int jc, int nc, float *restrict Bp) {
    for (int j = 0; j < nc; j += NR) {
        const int nr = MIN(NR, nc - j);
        float *d = Bp + (size_t)(j / NR) * nrows * NR;
        for (int r = 0; r < nrows; r++, d += NR) {
            const float *s = brow(w, b, pc, kc, r) + jc + j;
            if (nr == NR) {
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) *(vf *)(d + v * VL) = *(const vfu *)(s + v * VL);
            } else {
                for (int q = 0; q < nr; q++) d[q] = s[q];
                for (int q = nr; q < NR; q++) d[q] = 0.0f;
            }
        }
    }
}

void kernel(const float *restrict x, const float *restrict w, const float *restrict a,
            const float *restrict b, float *restrict out) {
    const int npan = DIVUP(N, NR); /* NR-wide column panels */
    int nth = omp_get_max_threads();
    if (nth > npan) nth = npan;
    if (nth < 1) nth = 1;
    /* column chunks of cpp panels (at most NCB columns), at least one chunk per thread */
    int cpp = NCB / NR > 0 ? NCB / NR : 1;
    if (cpp > DIVUP(npan, nth)) cpp = DIVUP(npan, nth);
    const int nchunk = DIVUP(npan, cpp);
    /* K blocks: the packed block (kcb + R rows of cpp panels) within BBYTES */
    const long bb = BBYTES > 0 ? BBYTES : ACCELOPT_L2_BYTES / 2;
    int kcmax = (int)(bb / (4L * cpp * NR)) - R;
    if (kcmax < 64) kcmax = 64;
    const int nkb = DIVUP(K, kcmax);
    const int kcb = DIVUP(DIVUP(K, nkb), 16) * 16;
    const size_t bsz = (size_t)(kcb + R) * cpp * NR;
    const size_t tsz = (size_t)M * RP, apsz = (size_t)K * RP;
    const size_t nbuf = (bsz * nth + tsz + apsz * nth + 15) & ~(size_t)15; /* whole 64 B lines */
    float *buf = (float *)aligned_alloc(64, nbuf * sizeof(float));
    float *T = buf + bsz * nth;
    const int nt_ok = (N % VL == 0) && (((uintptr_t)out & 63) == 0);
    int claimed = 0; /* chunk p is thread p's first; the others are claimed one ahead */

#pragma omp parallel num_threads(nth)
    {
        const int me = omp_get_thread_num(), P = omp_get_num_threads();
        float *Bp = buf + bsz * me;
        /* phase 1: t = x @ a, with this thread's zero-padded copy of a */
        float *ap = T + tsz + apsz * me;
        for (int k = 0; k < K; k++)
            for (int j = 0; j < RP; j++) ap[(size_t)k * RP + j] = j < R ? a[(size_t)k * R + j] : 0.0f;
#pragma omp for schedule(static)
        for (int g = 0; g < DIVUP(M, TM); g++)
            for (int v0 = 0; v0 < RP / VL; v0 += TV) t_tile(x, ap, T, g * TM, v0);
        /* (implicit barrier: t is complete) phase 2: out = x @ w + t @ b */
        const char *pq[PQMAX];
        int ch = me;
        while (ch < nchunk) {
            const int chn = P + __atomic_fetch_add(&claimed, 1, __ATOMIC_RELAXED);
            const int jc = ch * cpp * NR, nc = MIN(N - jc, cpp * NR);
            for (int pc = 0; pc < K; pc += kcb) {
                const int kc = MIN(K - pc, kcb), last = pc + kc >= K;
                const int nrows = kc + (last ? R : 0);
                pack_block(w, b, pc, kc, nrows, jc, nc, Bp);
                /* the block read next: (jc, pc + kc) or the first K block of the next chunk */
                int pn = pc + kc, jn = jc, ncn = nc;
                if (pn >= K) {
                    pn = 0;
                    jn = chn < nchunk ? chn * cpp * NR : N;
                    ncn = MIN(N - jn, cpp * NR);
                }
                const int kcn = MIN(K - pn, kcb), nrn = kcn + (pn + kcn >= K ? R : 0);
                const int nstr = DIVUP(M, MR), s0 = nstr - DIVUP(nstr, PFFRAC);
                const int pf_rows = jn < N ? DIVUP(nrn, nstr - s0) : 0;
                const int pf_lines = DIVUP(ncn, 16);
                for (int i = 0, s = 0; i < M; i += MR, s++) {
                    const int mr = MIN(M - i, MR);
                    int npq = 0;
                    if (s >= s0)
                        for (int r = (s - s0) * pf_rows; r < (s - s0 + 1) * pf_rows && r < nrn; r++) {
                            const char *src = (const char *)(brow(w, b, pn, kcn, r) + jn);
                            for (int l = 0; l < pf_lines; l++) {
                                if (npq < PQMAX)
                                    pq[npq++] = src + 64 * l;
                                else
                                    PREFETCH(src + 64 * l);
                            }
                        }
                    const int npc = DIVUP(nc, NR), qper = DIVUP(npq, npc);
                    const float *A = x + (size_t)i * K + pc;
                    const float *Tr = last ? T + (size_t)i * RP : NULL;
                    for (int j = 0, jq = 0; j < nc; j += NR, jq += qper) {
                        const int q0 = MIN(jq, npq), q1 = MIN(jq + qper, npq);
                        const int nr = MIN(nc - j, NR);
                        float *C = out + (size_t)i * N + jc + j;
                        const float *Bj = Bp + (size_t)(j / NR) * nrows * NR;
                        if (last && nt_ok)
                            ukr(kc, A, Tr, Bj, C, mr, nr, pc > 0, 1, pq + q0, q1 - q0);
                        else
                            ukr(kc, A, Tr, Bj, C, mr, nr, pc > 0, 0, pq + q0, q1 - q0);
                    }
                }
            }
            ch = chn;
        }
        SFENCE();
    }
    free(buf);
}
