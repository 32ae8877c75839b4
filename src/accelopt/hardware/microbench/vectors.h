/* The widest float vectors of the target, for the streaming micro-benchmarks (triad.c,
 * control.c): W lanes of type vf, aligned loads, plain and non-temporal stores (x86 only). */
#ifndef ACCELOPT_VECTORS_H
#define ACCELOPT_VECTORS_H
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__)
#define W 16
typedef __m512 vf;
#define VSET1 _mm512_set1_ps
#define VLOAD _mm512_load_ps
#define VSTREAM _mm512_stream_ps
#define VSTORE _mm512_store_ps
#define VADD _mm512_add_ps
#define VMUL _mm512_mul_ps
#elif defined(__AVX__)
#define W 8
typedef __m256 vf;
#define VSET1 _mm256_set1_ps
#define VLOAD _mm256_load_ps
#define VSTREAM _mm256_stream_ps
#define VSTORE _mm256_store_ps
#define VADD _mm256_add_ps
#define VMUL _mm256_mul_ps
#elif defined(__x86_64__)
#define W 4
typedef __m128 vf;
#define VSET1 _mm_set1_ps
#define VLOAD _mm_load_ps
#define VSTREAM _mm_stream_ps
#define VSTORE _mm_store_ps
#define VADD _mm_add_ps
#define VMUL _mm_mul_ps
#endif
#endif
