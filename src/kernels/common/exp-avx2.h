/* fp32 exp in AVX2 + FMA registers: the algorithm and constants of exp-simd.h (Cody-Waite reduction,
 * degree-7 polynomial), so the avx2 and avx512 tiers give the same values, with subnormal results
 * built without a subnormal multiply (below).
 * Included only by kernel files compiled with -mavx2 -mfma. */
#ifndef DSOPS_EXP_AVX2_H
#define DSOPS_EXP_AVX2_H

#include <immintrin.h>

#include "exp-simd.h"

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
    /* n >= -125: p 2^n as p 2^n1 2^n2 (both factors normal, n2 may overflow to +Inf as it should).
     * n <= -126: the result may be subnormal, and a multiply with a subnormal result costs a microcode
     * assist of ~100 cycles on Zen (the compressor's vendor data, logits ~1000 apart, ran 3x slower).
     * Those lanes take p 2^(n + 149), a normal number, rounded to an integer: the bit pattern of the
     * result (value = bits 2^-149 for bits < 2^24), rounded once as the multiply would have been. */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256 small = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(-125), ni));
    if (_mm256_testz_ps(small, small)) { /* no lane below 2^-125: the common case */
        __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
        __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
        __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
        return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
    }
    __m256i nh = _mm256_max_epi32(ni, _mm256_set1_epi32(-125));
    __m256i n1 = _mm256_srai_epi32(nh, 1), n2 = _mm256_sub_epi32(nh, n1);
    __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    __m256 normal = _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
    __m256i ns = _mm256_min_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(149)), _mm256_set1_epi32(23)); /* >= -1 */
    __m256 fs = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ns, _mm256_set1_epi32(127)), 23));
    __m256 tiny = _mm256_castsi256_ps(_mm256_cvtps_epi32(_mm256_mul_ps(p, fs)));
    return _mm256_blendv_ps(normal, tiny, small);
}

#endif
