/* Correct silu that leaves the floating-point and OpenMP state of its process changed: every
 * thread unmasks the FP exceptions, flushes denormals and rounds toward zero; OpenMP is told to
 * run nested regions on one thread and adjust teams itself. A kernel evaluated after it must not
 * inherit any of it. */
#include <math.h>
#include <omp.h>
#include <stddef.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

void kernel(const float *restrict x, float *restrict y) {
    const size_t n = (size_t)M * N;
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
#pragma omp parallel
    {
#if defined(__x86_64__)
        /* exceptions unmasked (bits 7-12 clear), FTZ (15) and DAZ (6), round toward zero (13-14) */
        _mm_setcsr((_mm_getcsr() & ~0x1F80u) | 0x8040u | 0x6000u);
#endif
    }
    omp_set_dynamic(1);
    omp_set_max_active_levels(0);
    omp_set_num_threads(1);
}
