/* swiglu expert: out[M, K] = (silu(x[M, K] @ w_gate[K, N]) * (x @ w_up[K, N])) @ w_down[N, K],
 * silu(g) = g / (1 + exp(-g)), float32 row-major.
 *
 * Two GEMMs with one register micro-kernel (MR x NR tile, NR = NV * VL):
 *  GEMM 1, hidden[M, N] = silu(x @ w_gate) * (x @ w_up): the packed B panels interleave the two
 *    weights, each NR-wide panel holding NR/2 columns of w_gate then the same NR/2 columns of
 *    w_up, so one tile computes the gate and up values of the same hidden elements side by side
 *    and its epilogue writes silu(gate) * up straight into the hidden scratch (M x N floats,
 *    L2 / L3 resident): gate and up never reach memory.  The K loop is not blocked (the
 *    epilogue needs complete sums; an MR x K strip of x stays in L1), so a chunk holds as many
 *    whole K x NR panels as fit in BBYTES.
 *  GEMM 2, out = hidden @ w_down: as matmul/expert.c, w_down in column chunks and K blocks
 *    (here the N rows) packed into L2, hidden strips streamed past; each out tile is written
 *    once (streaming stores) when N fits in one block.
 *  The hidden is computed whole before GEMM 2 (a barrier between the phases): both weights of
 *  GEMM 1 together exceed the L2 and would have to be streamed again for each row block if the
 *  two GEMMs were fused per row block, whereas the hidden (3 MiB for the cpu workload) makes
 *  one round trip through L3.
 *
 * Three code paths, chosen by the compiler's target; they differ in the vector width VL and the
 * tile (NV even: half the vectors gate, half up), the code is shared (GCC vector extensions,
 * which compile to FMAs on zmm / ymm / NEON registers, or mul + add without FMA):
 *  - AVX-512 (__AVX512F__): 6 x 64 tile, 24 zmm accumulators (per k: 4 zmm of B, 6 broadcasts
 *    of A, 24 FMAs); 64 divides K = 256 of the cpu workload (no padded panel in GEMM 2);
 *  - AVX2 + FMA (__AVX2__ and __FMA__): 6 x 16 tile, 12 ymm accumulators;
 *  - portable (anything else, aarch64 included): 4-wide vectors, 6 x 16 with 32 vector
 *    registers (aarch64), 6 x 8 elsewhere.
 * silu: a vectorized expf (as silu/expert.c: n = round(-g log2e), a degree-5 polynomial on the
 * reduced argument, 2^n from the exponent bits) applied to the tile after it is spilled to a
 * small L1 buffer; the compiler vectorizes it (#pragma omp simd) for the target.
 * Threads: in both GEMMs column chunks are handed out dynamically (chunk p is thread p's first,
 * the others are claimed one ahead); the block a thread reads next (including its first block
 * of GEMM 2) is prefetched into L2 during the last 1/PFFRAC of the current block's strips, a few
 * lines every KSTEP k-steps inside the micro-kernel: the weights are cold (DRAM) on each call.
 * Edges: rows past M reuse the last row's pointer (results dropped), columns past the edge are
 * zero in the packed panels and the tile goes through a buffer.
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
#define MR 6
#define NV 4
#define STREAM(p, v) _mm512_stream_ps((p), (__m512)(v))
#define SFENCE() _mm_sfence()
#elif defined(__AVX2__) && defined(__FMA__)
#define VL 8
#define MR 6
#define NV 2
#define STREAM(p, v) _mm256_stream_ps((p), (__m256)(v))
#define SFENCE() _mm_sfence()
#else
#define VL 4
#define MR 6
#if defined(__aarch64__)
#define NV 4
#else
#define NV 2
#endif
#define STREAM(p, v) (*(vf *)(p) = (v))
#define SFENCE() ((void)0)
#endif

typedef float vf __attribute__((vector_size(VL * 4)));              /* aligned vector */
typedef float vfu __attribute__((vector_size(VL * 4), aligned(4))); /* unaligned access */
#define NR (VL * NV)
#define NH (NR / 2) /* hidden columns per GEMM 1 panel */

#ifndef NCB
#define NCB 192 /* tune: 128 192 256 384 */ /* packed columns per chunk (whole panels) */
#endif
#ifndef BBYTES
#define BBYTES 0 /* tune: 0 262144 393216 524288 786432 */ /* packed block; 0: half the L2 */
#endif
#ifndef PFFRAC
#define PFFRAC 4 /* tune: 2 4 8 */
#endif
#ifndef KSTEP
#define KSTEP 32 /* tune: 16 32 64 */
#endif
#define PQMAX 1024
#define DIVUP(a, b) (((a) + (b) - 1) / (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define PREFETCH(p) __builtin_prefetch((p), 0, 1) /* prefetcht2 on x86: into L2 */

/* silu(g) * u; exp(-g) as in silu/expert.c (portable form, vectorized by the compiler): g is
 * clamped to [-89, 87] on its bits (integer min, which if-converts), so 2^n is a normal float
 * or (n = 128) the bits of +inf, and g / inf = -0 for g << 0 as in the reference */
#pragma omp declare simd notinbranch
static inline float silu_mul(float g, float u) {
    uint32_t xb;
    memcpy(&xb, &g, sizeof xb);
    xb = xb < 0xC2B20000u ? xb : 0xC2B20000u;                                /* bits(-89.0f) */
    const int32_t xs = (int32_t)xb < 0x42AE0000 ? (int32_t)xb : 0x42AE0000; /* bits(87.0f) */
    float xc;
    memcpy(&xc, &xs, sizeof xc);
    const float kn = 12583039.0f - xc * 1.44269504088896341f; /* 1.5 * 2^23 + 127 */
    const float n = kn - 12583039.0f;
    float r = xc + n * 0.693359375f;
    r = r + n * -2.12194440e-4f;
    const float r2 = r * r;
    const float c01 = r * -9.999995827674866e-1f + 1.0f;
    const float c23 = r * -1.6668051481246948e-1f + 4.9999141693115234e-1f;
    const float c45 = r * -8.265268057584763e-3f + 4.189871624112129e-2f;
    const float p = (c45 * r2 + c23) * r2 + c01;
    uint32_t bits;
    memcpy(&bits, &kn, sizeof bits);
    bits <<= 23; /* the low bits of kn hold n + 127: shifted left by 23 they are 2^n */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return g / (p * scale + 1.0f) * u;
}

/* mode SILU: H[mr x nr/2] = silu(gate) * up of the tile (gate: its first NV/2 vectors);
 * mode PLAIN: C[mr x nr] (+)= the tile (acc), streaming stores with nt */
enum { PLAIN, SILU };

/* tile = A[MR rows (stride lda), kc] @ Bp[kc x NR], then the mode's epilogue; pq: npq lines to
 * prefetch, a few every KSTEP k-steps */
static inline __attribute__((always_inline)) void ukr(int mode, int kc, const float *restrict A,
                                                      int lda, const float *restrict Bp,
                                                      float *restrict C, int ldc, int mr, int nr,
                                                      int acc, int nt, const char *const *pq,
                                                      int npq) {
    vf c[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) c[r][v] = (vf){0};
    const float *a[MR];
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(r < mr ? r : mr - 1) * lda;
    const int per = DIVUP(npq, DIVUP(kc, KSTEP));
    int qi = 0;
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
    if (mode == SILU) {
        float tb[MR][NR] __attribute__((aligned(64)));
        memcpy(tb, c, sizeof tb);
        const int nh = nr / 2;
        for (int r = 0; r < mr; r++) {
            float *h = C + (size_t)r * ldc;
            const float *g = tb[r], *u = tb[r] + NH;
            if (nh == NH) {
#pragma omp simd
                for (int j = 0; j < NH; j++) h[j] = silu_mul(g[j], u[j]);
            } else {
#pragma omp simd
                for (int j = 0; j < nh; j++) h[j] = silu_mul(g[j], u[j]);
            }
        }
    } else if (mr == MR && nr == NR) {
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            float *cp = C + (size_t)r * ldc;
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
            float *cp = C + (size_t)r * ldc;
            memcpy(tb, c[r], sizeof tb);
            for (int j = 0; j < nr; j++) cp[j] = acc ? cp[j] + tb[j] : tb[j];
        }
    }
}

/* a block of B: rows [0, nrows) at s0 (and, interleaved, s1) with row stride ld, columns
 * [0, ncols) of each source; packed into NR-wide panels of ncols (or, with s1, NR/2 of each
 * source per panel) */
struct blk {
    const float *s0, *s1;
    int ld, nrows, ncols;
};

/* copy n floats of s to d, zero-fill d up to w */
static inline void copy_pad(float *restrict d, const float *restrict s, int n, int w) {
    if (n == w && w % VL == 0) {
        for (int q = 0; q < w; q += VL) *(vf *)(d + q) = *(const vfu *)(s + q);
    } else {
        for (int q = 0; q < n; q++) d[q] = s[q];
        for (int q = n; q < w; q++) d[q] = 0.0f;
    }
}

/* pack block b into panels of b.nrows x NR at Bp, panel p at Bp + p * nrows * NR */
static void pack_block(struct blk b, float *restrict Bp) {
    const int pw = b.s1 ? NH : NR; /* columns of each source per panel */
    for (int j = 0; j < b.ncols; j += pw) {
        const int n = MIN(pw, b.ncols - j);
        float *d = Bp + (size_t)(j / pw) * b.nrows * NR;
        for (int r = 0; r < b.nrows; r++, d += NR) {
            copy_pad(d, b.s0 + (size_t)r * b.ld + j, n, pw);
            if (b.s1) copy_pad(d + NH, b.s1 + (size_t)r * b.ld + j, n, NH);
        }
    }
}

/* queue the lines of block nb that strip s prefetches: its rows are split evenly over the last
 * nstr - s0 strips of the current block */
static int queue_pf(const struct blk *nb, int s, int s0, int nstr, const char **pq) {
    int npq = 0;
    if (!nb || s < s0) return 0;
    const int rows = DIVUP(nb->nrows, nstr - s0), lines = DIVUP(nb->ncols, 16);
    for (int r = (s - s0) * rows; r < (s - s0 + 1) * rows && r < nb->nrows; r++)
        for (int src = 0; src < (nb->s1 ? 2 : 1); src++) {
            const char *p = (const char *)((src ? nb->s1 : nb->s0) + (size_t)r * nb->ld);
            for (int l = 0; l < lines; l++) {
                if (npq < PQMAX)
                    pq[npq++] = p + 64 * l;
                else
                    PREFETCH(p + 64 * l);
            }
        }
    return npq;
}

/* one packed block against all M rows of A: mode SILU writes hidden columns from C, mode PLAIN
 * (+)= out; nb, if any, is prefetched on the way */
static void run_block(int mode, struct blk b, const float *restrict Bp, const float *restrict A,
                      int lda, float *restrict C, int ldc, int acc, int nt, const struct blk *nb) {
    const int pw = b.s1 ? NH : NR, nstr = DIVUP(M, MR), s0 = nstr - DIVUP(nstr, PFFRAC);
    const int npan = DIVUP(b.ncols, pw);
    const char *pq[PQMAX];
    for (int i = 0, s = 0; i < M; i += MR, s++) {
        const int mr = MIN(M - i, MR);
        const int npq = queue_pf(nb, s, s0, nstr, pq), qper = DIVUP(npq, npan);
        for (int p = 0; p < npan; p++) {
            const int q0 = MIN(p * qper, npq), q1 = MIN(p * qper + qper, npq);
            const int nr = MIN(b.ncols - p * pw, pw) * (b.s1 ? 2 : 1);
            const float *Bj = Bp + (size_t)p * b.nrows * NR;
            float *Cp = C + (size_t)i * ldc + p * pw;
            const float *Ai = A + (size_t)i * lda;
            if (mode == SILU)
                ukr(SILU, b.nrows, Ai, lda, Bj, Cp, ldc, mr, nr, 0, 0, pq + q0, q1 - q0);
            else if (nt)
                ukr(PLAIN, b.nrows, Ai, lda, Bj, Cp, ldc, mr, nr, acc, 1, pq + q0, q1 - q0);
            else
                ukr(PLAIN, b.nrows, Ai, lda, Bj, Cp, ldc, mr, nr, acc, 0, pq + q0, q1 - q0);
        }
    }
}

/* the geometry of both GEMMs */
struct geo {
    int cpp1, nch1;            /* GEMM 1: panels per chunk, chunks */
    int cpp2, nch2, kcb;       /* GEMM 2: panels per chunk, chunks, rows (of N) per K block */
};

/* GEMM 1 chunk c: all K rows of w_gate and w_up, hidden columns [c * cpp1 * NH, ...) */
static inline struct blk blk1(const struct geo *g, const float *wg, const float *wu, int c) {
    const int j = c * g->cpp1 * NH;
    struct blk b = {wg + j, wu + j, N, K, MIN(N - j, g->cpp1 * NH)};
    return b;
}

/* GEMM 2 chunk c, K block starting at row pc of w_down */
static inline struct blk blk2(const struct geo *g, const float *wd, int c, int pc) {
    const int j = c * g->cpp2 * NR;
    struct blk b = {wd + (size_t)pc * K + j, NULL, K, MIN(N - pc, g->kcb), MIN(K - j, g->cpp2 * NR)};
    return b;
}

void kernel(const float *restrict x, const float *restrict w_up, const float *restrict w_down,
            const float *restrict w_gate, float *restrict out) {
    int nth = omp_get_max_threads();
    if (nth < 1) nth = 1;
    const long bb = BBYTES > 0 ? BBYTES : ACCELOPT_L2_BYTES / 2;
    struct geo g;
    /* GEMM 1: whole K x NR panels, as many as fit bb and NCB, at least one chunk per thread */
    const int np1 = DIVUP(N, NH);
    g.cpp1 = MAX(1, MIN(NCB / NR, (int)(bb / (4L * K * NR))));
    g.cpp1 = MIN(g.cpp1, DIVUP(np1, nth));
    g.nch1 = DIVUP(np1, g.cpp1);
    /* GEMM 2: NCB columns of w_down per chunk, K blocks of kcb rows within bb */
    const int np2 = DIVUP(K, NR);
    g.cpp2 = MAX(1, MIN(NCB / NR, DIVUP(np2, nth)));
    g.nch2 = DIVUP(np2, g.cpp2);
    const int kcmax = MAX(64, (int)(bb / (4L * g.cpp2 * NR)));
    const int nkb = DIVUP(N, kcmax);
    g.kcb = DIVUP(DIVUP(N, nkb), 16) * 16;
    const size_t bsz = MAX((size_t)K * g.cpp1 * NR, (size_t)g.kcb * g.cpp2 * NR);
    const size_t nbuf = (bsz * nth + (size_t)M * N + 15) & ~(size_t)15; /* whole 64 B lines */
    float *buf = (float *)aligned_alloc(64, nbuf * sizeof(float));
    float *H = buf + bsz * nth;
    const int nt_ok = (K % VL == 0) && (((uintptr_t)out & 63) == 0);
    int claimed1 = 0, claimed2 = 0; /* chunk p is thread p's first; the others one ahead */

#pragma omp parallel num_threads(nth)
    {
        const int me = omp_get_thread_num(), P = omp_get_num_threads();
        float *Bp = buf + bsz * me;
        /* GEMM 1: hidden = silu(x @ w_gate) * (x @ w_up) */
        int ch = me;
        while (ch < g.nch1) {
            const int chn = P + __atomic_fetch_add(&claimed1, 1, __ATOMIC_RELAXED);
            const struct blk b = blk1(&g, w_gate, w_up, ch);
            /* next: this thread's next chunk, or its first block of GEMM 2 */
            const int has_next = chn < g.nch1 || me < g.nch2;
            struct blk nb = b;
            if (chn < g.nch1)
                nb = blk1(&g, w_gate, w_up, chn);
            else if (me < g.nch2)
                nb = blk2(&g, w_down, me, 0);
            pack_block(b, Bp);
            run_block(SILU, b, Bp, x, K, H + (size_t)ch * g.cpp1 * NH, N, 0, 0,
                      has_next ? &nb : NULL);
            ch = chn;
        }
#pragma omp barrier
        /* GEMM 2: out = hidden @ w_down */
        ch = me;
        while (ch < g.nch2) {
            const int chn = P + __atomic_fetch_add(&claimed2, 1, __ATOMIC_RELAXED);
            for (int pc = 0; pc < N; pc += g.kcb) {
                const struct blk b = blk2(&g, w_down, ch, pc);
                const int last = pc + b.nrows >= N;
                const int has_next = !last || chn < g.nch2;
                struct blk nb = b;
                if (has_next) nb = !last ? blk2(&g, w_down, ch, pc + b.nrows) : blk2(&g, w_down, chn, 0);
                pack_block(b, Bp);
                run_block(PLAIN, b, Bp, H + pc, N, out + (size_t)ch * g.cpp2 * NR, K, pc > 0,
                          last && nt_ok, has_next ? &nb : NULL);
            }
            ch = chn;
        }
        SFENCE();
    }
    free(buf);
}
