/* Correct silu that prints the floating-point and OpenMP state it found (once per process). */
#include <math.h>
#include <omp.h>
#include <stddef.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static int told;

void kernel(const float *restrict x, float *restrict y) {
    const size_t n = (size_t)M * N;
    if (!told) {
        told = 1;
        unsigned csr = 0;
#if defined(__x86_64__)
        csr = _mm_getcsr();
#endif
        __builtin_printf("state threads=%d dynamic=%d levels=%d mxcsr=%x\n", omp_get_max_threads(),
               omp_get_dynamic(), omp_get_max_active_levels(), csr & ~0x3Fu);
    }
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}
