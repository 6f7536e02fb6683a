/* fp32 exp in AVX2 + FMA registers: the algorithm and constants of exp-simd.h (Cody-Waite reduction,
 * degree-7 polynomial, 2^n as two normal factors), so the avx2 and avx512 tiers give the same values.
 * Included only by kernel files compiled with -mavx2 -mfma. */
#ifndef DSOPS_EXP_AVX2_H
#define DSOPS_EXP_AVX2_H

#include <immintrin.h>

#include "../attention/exp-simd.h"

/* 8 lanes of exp (NaN lanes give a value, not NaN: callers that must keep NaN blend it back). */
static inline __attribute__((always_inline)) __m256 dsops_exp8_avx2(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(DSOPS_EXP_MIN)), _mm256_set1_ps(DSOPS_EXP_MAX));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(DSOPS_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(DSOPS_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(DSOPS_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(DSOPS_EXP_C7);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(DSOPS_EXP_C6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(DSOPS_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(DSOPS_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(DSOPS_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(DSOPS_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
}

#endif
