/* fp32 exp shared by the SIMD tiers (included by kernel files compiled with their ISA flags).
 * x = n*ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), exp(r) by its degree-7 Taylor
 * polynomial (truncation < 0.1 ulp), 2^n applied as two exact power-of-two factors so results in
 * the subnormal range round once. Max error about 1 ulp (tests check <= 2 ulp against expf). */
#ifndef DSOPS_EXP_SIMD_H
#define DSOPS_EXP_SIMD_H

#define DSOPS_EXP_LOG2E 1.44269504088896341f
#define DSOPS_EXP_LN2_HI 0.693145751953125f
#define DSOPS_EXP_LN2_LO 1.42860676533018672e-06f
#define DSOPS_EXP_MIN (-104.0f) /* below: result rounds to +0 */
#define DSOPS_EXP_MAX 89.0f     /* above: result overflows to +Inf */
#define DSOPS_EXP_C2 (1.0f / 2.0f)
#define DSOPS_EXP_C3 (1.0f / 6.0f)
#define DSOPS_EXP_C4 (1.0f / 24.0f)
#define DSOPS_EXP_C5 (1.0f / 120.0f)
#define DSOPS_EXP_C6 (1.0f / 720.0f)
#define DSOPS_EXP_C7 (1.0f / 5040.0f)

#ifdef __AVX512F__
#include <immintrin.h>

/* 16 lanes of exp (NaN lanes give a value, not NaN: callers that must keep NaN blend it back). */
static inline __attribute__((always_inline)) __m512 exp512(__m512 x)
{
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(DSOPS_EXP_MIN)), _mm512_set1_ps(DSOPS_EXP_MAX));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(DSOPS_EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(DSOPS_EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(DSOPS_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(DSOPS_EXP_C7);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(DSOPS_EXP_C6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(DSOPS_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(DSOPS_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(DSOPS_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(DSOPS_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    /* 2^n = 2^n1 * 2^n2 with both factors normal */
    __m512i ni = _mm512_cvtps_epi32(n);
    __m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
    __m512 f1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, _mm512_set1_epi32(127)), 23));
    __m512 f2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, _mm512_set1_epi32(127)), 23));
    return _mm512_mul_ps(_mm512_mul_ps(p, f1), f2);
}
#endif

#endif
