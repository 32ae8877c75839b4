/* The control of a timed evaluation (accelopt): a short, trusted run of the loop that sets one
 * ceiling, timed in the worker between slices of a kernel's timed calls, so that the kernel's %
 * of peak can be taken against the machine as it was at that moment (profiling/worker/control.py).
 *
 * A shared library, loaded by the worker with ctypes; every function runs on THREADS POSIX
 * threads (the kernel's thread count) and returns a rate measured by its own clock:
 *
 *   accelopt_flops(threads, iterations)   FLOP/s of NACC independent chains acc = acc * m + a on
 *       the widest vectors, as hardware/microbench/flops.c: built with -ffp-contract=fast each
 *       update is one FMA (the matmul ceiling), with -ffp-contract=off a multiply then an add
 *       (the vector ceiling). 2 FLOP per lane per update either way.
 *   accelopt_stream(threads, reads, writes, elements, nontemporal)   bytes/s of a streaming pass
 *       that reads READS arrays and writes WRITES arrays of ELEMENTS floats each (the problem's
 *       read:write mix), chunk by chunk so that every stream is in flight at once, over arrays
 *       made once by accelopt_stream_init; successive calls move on through the arrays, so each
 *       pass starts from memory, not cache. Bytes are counted as the roofline counts them.
 *
 * No OpenMP: the worker's threads must not spin after a control (libgomp's idle threads would),
 * since the kernel's timed calls come right after it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#if defined(__AVX512F__)
#define VBYTES 64
#define NACC 16
#elif defined(__AVX__)
#define VBYTES 32
#define NACC 12
#elif defined(__aarch64__)
#define VBYTES 16
#define NACC 24
#else
#define VBYTES 16
#define NACC 12
#endif
#define LANES (VBYTES / 4)
#define MAX_THREADS 1024
#define MAX_STREAMS 8
#define CHUNK 2048 /* floats per stream and step: 8 KiB, the scratch stays in L1 */

typedef float vec __attribute__((vector_size(VBYTES)));

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    long iterations;
    int index;
    int threads;
    int reads, writes, nontemporal;
    long elements, first;
    float sink;
    double t0, t1; /* this thread's own start and end */
    pthread_barrier_t *start;
} task;

static void *chains(void *arg) {
    task *t = arg;
    /* m, a and every lane of every chain differ and come from memory the compiler cannot see
     * through, so nothing is folded or narrowed to scalars. */
    volatile float m_s = 0.9999999f, a_s = 1e-7f;
    vec zero = {0};
    vec m = zero + m_s, a = zero + a_s;
    vec acc[NACC];
    for (int j = 0; j < NACC; j++)
        for (int l = 0; l < LANES; l++) acc[j][l] = 1.0f + 0.01f * (float)(t->index + j) + 1e-4f * (float)l;
    pthread_barrier_wait(t->start);
    t->t0 = now();
    for (long i = 0; i < t->iterations; i++) {
        for (int j = 0; j < NACC; j++) acc[j] = acc[j] * m + a;
    }
    float sum = 0.0f;
    for (int j = 0; j < NACC; j++)
        for (int l = 0; l < LANES; l++) sum += acc[j][l];
    t->sink = sum;
    t->t1 = now();
    return NULL;
}

#include "vectors.h"

static float *streams[MAX_STREAMS];
static long stream_elements;
static long cursor; /* where the next pass starts, in elements of each stream */

static void store(float *to, const float *from, long n, float scale, int nontemporal) {
#if defined(__x86_64__)
    if (nontemporal) {
        const vf s = VSET1(scale);
        for (long i = 0; i < n; i += W) VSTREAM(to + i, VMUL(s, VLOAD(from + i)));
        return;
    }
#endif
    (void)nontemporal;
    for (long i = 0; i < n; i++) to[i] = scale * from[i];
}

static void *stream_pass(void *arg) {
    task *t = arg;
    float scratch[CHUNK] __attribute__((aligned(64)));
    long share = t->elements / t->threads / CHUNK * CHUNK;
    long lo = t->first + share * t->index, hi = lo + share;
    pthread_barrier_wait(t->start);
    t->t0 = now();
    for (long at = lo; at < hi; at += CHUNK) {
        memcpy(scratch, streams[0] + at, sizeof scratch);
        for (int r = 1; r < t->reads; r++) {
            const float *in = streams[r] + at;
            for (int i = 0; i < CHUNK; i++) scratch[i] += in[i];
        }
        for (int w = 0; w < t->writes; w++)
            store(streams[t->reads + w] + at, scratch, CHUNK, 1.0f + (float)w, t->nontemporal);
    }
#if defined(__x86_64__)
    _mm_sfence();
#endif
    t->sink = scratch[t->index % CHUNK];
    t->t1 = now();
    return NULL;
}

/* The ceiling's own patterns (microbench/triad.c) for a mix of 1-4 arrays read into one
 * written: a = s*b (1:1), b + s*c (2:1), + d (3:1), + d*e (4:1); stores streamed past the cache
 * (x86) or plain (elsewhere, as portable C would be). */
#if defined(__x86_64__)
#define PATTERN(STORE)                                                                        \
    switch (t->reads) {                                                                       \
    case 1: for (long i = lo; i < hi; i += W) STORE(a + i, VMUL(vs, VLOAD(b + i))); break;    \
    case 2:                                                                                   \
        for (long i = lo; i < hi; i += W) STORE(a + i, VADD(VLOAD(b + i), VMUL(vs, VLOAD(c + i)))); \
        break;                                                                                \
    case 3:                                                                                   \
        for (long i = lo; i < hi; i += W)                                                     \
            STORE(a + i, VADD(VADD(VLOAD(b + i), VMUL(vs, VLOAD(c + i))), VLOAD(d + i)));     \
        break;                                                                                \
    default:                                                                                  \
        for (long i = lo; i < hi; i += W)                                                     \
            STORE(a + i, VADD(VADD(VLOAD(b + i), VMUL(vs, VLOAD(c + i))),                     \
                              VMUL(VLOAD(d + i), VLOAD(e + i))));                             \
        break;                                                                                \
    }
#endif

static void *pattern_pass(void *arg) {
    task *t = arg;
    long share = t->elements / t->threads / CHUNK * CHUNK;
    long lo = t->first + share * t->index, hi = lo + share;
    float *a = streams[t->reads];
    const float *b = streams[0], *c = streams[1], *d = streams[2], *e = streams[3];
    const float s = 3.0f;
    pthread_barrier_wait(t->start);
    t->t0 = now();
#if defined(__x86_64__)
    const vf vs = VSET1(s);
    if (t->nontemporal) {
        PATTERN(VSTREAM)
        _mm_sfence();
    } else {
        PATTERN(VSTORE)
    }
#else
    for (long i = lo; i < hi; i++) {
        float v = b[i];
        if (t->reads > 1) v += s * c[i];
        if (t->reads > 2) v += t->reads > 3 ? d[i] * e[i] : d[i];
        a[i] = t->reads == 1 ? s * v : v;
    }
#endif
    t->sink = a[lo];
    t->t1 = now();
    return NULL;
}

/* Thread I's CPU: the I-th of the process's allowed CPUs, round robin (as OMP_PROC_BIND=spread
 * places the ceiling's threads: unpinned, two threads of a streaming loop migrate and share a CPU
 * with the caller, and stream 30 % slower). */
static void pin(pthread_attr_t *attr, int index) {
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    int count = CPU_COUNT(&allowed), seen = 0;
    if (count < 1) return;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (seen++ == index % count) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_attr_setaffinity_np(attr, sizeof one, &one);
            return;
        }
    }
}

/* Run FN on THREADS threads released together; seconds from the first thread's start to the
 * last one's end, by the threads' own clocks (the caller may not run again before they end). */
static double run_threads(void *(*fn)(void *), task *tasks, int threads) {
    pthread_t ids[MAX_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    int made = 0;
    for (; made < threads; made++) {
        tasks[made].start = &start;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pin(&attr, made);
        int failed = pthread_create(&ids[made], &attr, fn, &tasks[made]);
        pthread_attr_destroy(&attr);
        if (failed) break;
    }
    if (made < threads) { /* cannot happen in practice; the caller reads 0 as a failure */
        for (int i = made; i < threads; i++) pthread_barrier_wait(&start);
        return 0.0;
    }
    pthread_barrier_wait(&start);
    double first = 0, last = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ids[i], NULL);
        if (i == 0 || tasks[i].t0 < first) first = tasks[i].t0;
        if (i == 0 || tasks[i].t1 > last) last = tasks[i].t1;
    }
    pthread_barrier_destroy(&start);
    return last - first;
}

double accelopt_flops(int threads, long iterations) {
    if (threads < 1 || threads > MAX_THREADS || iterations < 1) return 0.0;
    task tasks[MAX_THREADS];
    for (int i = 0; i < threads; i++)
        tasks[i] = (task){.iterations = iterations, .index = i, .threads = threads};
    double seconds = run_threads(chains, tasks, threads);
    return seconds > 0 ? (double)threads * (double)iterations * NACC * LANES * 2.0 / seconds : 0.0;
}

/* Make the arrays: COUNT streams of ELEMENTS floats, 2 MiB aligned, huge pages where allowed (as
 * the kernels' buffers), first touched by as many threads as will use them. 0 on success. */
int accelopt_stream_init(int count, long elements) {
    if (count < 2 || count > MAX_STREAMS || elements < CHUNK) return 1;
    for (int s = 0; s < MAX_STREAMS; s++) { /* arrays made before: replaced */
        free(streams[s]);
        streams[s] = NULL;
    }
    size_t bytes = ((size_t)elements * sizeof(float) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    for (int s = 0; s < count; s++) {
        streams[s] = aligned_alloc((size_t)2 << 20, bytes);
        if (streams[s] == NULL) return 2;
#if defined(MADV_HUGEPAGE)
        madvise(streams[s], bytes, MADV_HUGEPAGE);
#endif
        for (long i = 0; i < elements; i++) streams[s][i] = 1.0f + (float)(i & 7);
    }
    stream_elements = elements / CHUNK * CHUNK;
    cursor = 0;
    return 0;
}

double accelopt_stream(int threads, int reads, int writes, long elements, int nontemporal) {
    if (threads < 1 || threads > MAX_THREADS || reads < 1 || writes < 0) return 0.0;
    if (reads + writes > MAX_STREAMS || streams[reads + writes - 1] == NULL) return 0.0;
    elements = elements / ((long)threads * CHUNK) * ((long)threads * CHUNK);
    if (elements < (long)threads * CHUNK || elements > stream_elements) return 0.0;
    if (cursor + elements > stream_elements) cursor = 0;
    task tasks[MAX_THREADS];
    for (int i = 0; i < threads; i++)
        tasks[i] = (task){.index = i, .threads = threads, .reads = reads, .writes = writes,
                          .nontemporal = nontemporal, .elements = elements, .first = cursor};
    /* one array written: the ceiling's own pattern; several: the chunked pass */
    double seconds = run_threads(writes == 1 ? pattern_pass : stream_pass, tasks, threads);
    cursor += elements;
    double bytes = 4.0 * (double)elements * (reads + writes);
    return seconds > 0 ? bytes / seconds : 0.0;
}
