/* Dot-product throughput probes, AVX2: fp32 FMA (the AVX2 tier widens bf16 to fp32) and
 * u8 x s8 via vpmaddubsw + vpmaddwd. */
#include <immintrin.h>

#include "dispatch.h"

#define CHAINS 12

static double peak_bf16_dot__avx2(long iters)
{
    __m256 acc[CHAINS];
    for (int i = 0; i < CHAINS; i++)
        acc[i] = _mm256_set1_ps((float)i);
    __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++)
            acc[i] = _mm256_fmadd_ps(acc[i], x, y);
        __asm__ volatile("" : "+x"(x));
    }
    __m256 s = acc[0];
    for (int i = 1; i < CHAINS; i++)
        s = _mm256_add_ps(s, acc[i]);
    volatile float sink = _mm256_cvtss_f32(s);
    (void)sink;
    return (double)iters * CHAINS * 8.0;
}

static double peak_int8_dot__avx2(long iters)
{
    __m256i acc[CHAINS];
    for (int i = 0; i < CHAINS; i++)
        acc[i] = _mm256_set1_epi32(i);
    __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++)
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones));
        __asm__ volatile("" : "+x"(u));
    }
    __m256i r = acc[0];
    for (int i = 1; i < CHAINS; i++)
        r = _mm256_add_epi32(r, acc[i]);
    volatile int sink = _mm256_cvtsi256_si32(r);
    (void)sink;
    return (double)iters * CHAINS * 32.0;
}

const dsops_peak_kernels dsops_peak_kernels__avx2 = {
    .bf16_dot = peak_bf16_dot__avx2,
    .int8_dot = peak_int8_dot__avx2,
    .fp32_fma = peak_bf16_dot__avx2, /* the AVX2 bf16 probe is an fp32 FMA chain */
};
