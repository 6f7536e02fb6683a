/* bf16 <-> fp32 conversions in AVX-512 registers, bit-identical to the scalar conversions of the library
 * (round to nearest even, NaN kept quiet with its sign; subnormals kept, unlike vcvtneps2bf16). */
#ifndef DSOPS_BF16_AVX512_H
#define DSOPS_BF16_AVX512_H

#include <immintrin.h>
#include <stdint.h>

static inline __attribute__((always_inline)) __m256i bf16_rne(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

/* 16 bf16 values (exact) as fp32; the masked form reads only the lanes of m. */
static inline __attribute__((always_inline)) __m512 bf16_widen(const uint16_t *p)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

static inline __attribute__((always_inline)) __m512 bf16_widen_mask(const uint16_t *p, __mmask16 m)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

#endif
