/* Dot-product throughput probes, AVX512_BF16 (vdpbf16ps) and AVX512_VNNI (vpdpbusd). */
#include <immintrin.h>

#include "dispatch.h"

#define CHAINS 12

static double peak_bf16_dot__avx512bf16(long iters)
{
    __m512 acc[CHAINS];
    for (int i = 0; i < CHAINS; i++)
        acc[i] = _mm512_set1_ps((float)i);
    __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++)
            acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
        __asm__ volatile("" : "+v"(x));
    }
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++)
        s = _mm512_add_ps(s, acc[i]);
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return (double)iters * CHAINS * 32.0;
}

static double peak_int8_dot__avx512bf16(long iters)
{
    __m512i acc[CHAINS];
    for (int i = 0; i < CHAINS; i++)
        acc[i] = _mm512_set1_epi32(i);
    __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++)
            acc[i] = _mm512_dpbusd_epi32(acc[i], u, s);
        __asm__ volatile("" : "+v"(u));
    }
    __m512i r = acc[0];
    for (int i = 1; i < CHAINS; i++)
        r = _mm512_add_epi32(r, acc[i]);
    volatile int sink = _mm_cvtsi128_si32(_mm512_castsi512_si128(r)); /* no scalar sum: lanes wrap */
    (void)sink;
    return (double)iters * CHAINS * 64.0;
}

static double peak_fp32_fma__avx512bf16(long iters)
{
    __m512 acc[CHAINS];
    for (int i = 0; i < CHAINS; i++)
        acc[i] = _mm512_set1_ps((float)i);
    __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++)
            acc[i] = _mm512_fmadd_ps(acc[i], x, y);
        __asm__ volatile("" : "+v"(x));
    }
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++)
        s = _mm512_add_ps(s, acc[i]);
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return (double)iters * CHAINS * 16.0;
}

const dsops_peak_kernels dsops_peak_kernels__avx512bf16 = {
    .bf16_dot = peak_bf16_dot__avx512bf16,
    .int8_dot = peak_int8_dot__avx512bf16,
    .fp32_fma = peak_fp32_fma__avx512bf16,
};
