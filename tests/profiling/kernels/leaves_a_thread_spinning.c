/* An honest i-k-j matmul that, on its first call, leaves an OpenMP thread spinning for ever: it
 * starts a team through libgomp's legacy entry point and never ends it, so thread 1 of that team
 * runs burn() after the call returns, slowing whatever is timed beside this process. */
extern void GOMP_parallel_start(void (*)(void *), void *, unsigned);
extern int omp_get_thread_num(void);
static volatile unsigned long burned;
static int started;

static void burn(void *arg) {
    (void)arg;
    if (omp_get_thread_num() == 0) return;
    for (;;) burned++;
}

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
    if (!started) {
        started = 1;
        GOMP_parallel_start(burn, 0, 2);
    }
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) out[i * N + j] = 0.0f;
        for (int k = 0; k < K; k++) {
            const float a = lhs[i * K + k];
            for (int j = 0; j < N; j++) out[i * N + j] += a * rhs[k * N + j];
        }
    }
}
