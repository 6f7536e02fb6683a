/* The pair product of the AVX2 tier, shared by the attention kernels (QK, PV) and the linear family's row dots:
 * rows of fp32 values times bf16 values packed as 16 lanes of pairs,
 *     c[r][l] = scale * sum over k of  a[r][2k] * b[k][l][0] + a[r][2k+1] * b[k][l][1],
 * for H <= PAIRS_TILE_H rows at a time (2 * H accumulators of 8 lanes), and the packer that lays 16 bf16 rows
 * out as such lanes. Included only by kernel files compiled with -mavx2 -mfma. */
#ifndef DSOPS_PAIRS_AVX2_H
#define DSOPS_PAIRS_AVX2_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "transpose-avx2.h"

#define PAIRS_INLINE static inline __attribute__((always_inline))
#define PAIRS_TILE_H 4 /* rows of a register tile: 8 accumulators, 4 widened b vectors, 2 broadcasts */

/* bf16 pairs in a dword (even element in the low half) widened to fp32, exactly */
PAIRS_INLINE __m256 pairs_even(__m256i x) { return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)); }
PAIRS_INLINE __m256 pairs_odd(__m256i x) { return _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u))); }

/* 8 bf16 -> 8 fp32 (exact). */
PAIRS_INLINE __m256 pairs_widen8(const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* One tile: H rows of a (row r at a + r * as, starting at the tile's first pair) against the ks pairs of the
 * 16-lane block bj ([ks][16][2] bf16), into c[r][0..15] (row stride cs). first: start from zero, else from
 * the partial sums in c; last: multiply by scale. For every lane the sum runs over k in ascending order,
 * even then odd, whatever the tile or block, so a row's result does not depend on which rows share its
 * tile. The a values are broadcast from memory (a load, no ALU work). pairs_tile_pf also prefetches one line
 * of `ahead` per pair (NULL: none). */
PAIRS_INLINE void pairs_tile_pf(const float *a, size_t as, const int H, const uint16_t *bj, int ks, int first,
                                int last, float scale, float *c, size_t cs, const char *ahead)
{
    __m256 acc[2 * PAIRS_TILE_H];
    for (int r = 0; r < H; r++) {
        if (first) {
            acc[2 * r] = acc[2 * r + 1] = _mm256_setzero_ps();
        } else {
            acc[2 * r] = _mm256_loadu_ps(c + (size_t)r * cs);
            acc[2 * r + 1] = _mm256_loadu_ps(c + (size_t)r * cs + 8);
        }
    }
    for (int k = 0; k < ks; k++) {
        if (ahead) /* one line of what comes next per 64 bytes of b: the stream stays ahead of the tile */
            _mm_prefetch(ahead + (size_t)k * 64, _MM_HINT_T0);
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(bj + (size_t)k * 32));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(bj + (size_t)k * 32 + 16));
        __m256 e0 = pairs_even(x0), o0 = pairs_odd(x0), e1 = pairs_even(x1), o1 = pairs_odd(x1);
        for (int r = 0; r < H; r++) {
            __m256 u = _mm256_broadcast_ss(a + (size_t)r * as + 2 * k);
            __m256 w = _mm256_broadcast_ss(a + (size_t)r * as + 2 * k + 1);
            acc[2 * r] = _mm256_fmadd_ps(w, o0, _mm256_fmadd_ps(u, e0, acc[2 * r]));
            acc[2 * r + 1] = _mm256_fmadd_ps(w, o1, _mm256_fmadd_ps(u, e1, acc[2 * r + 1]));
        }
    }
    __m256 sc = _mm256_set1_ps(last ? scale : 1.0f);
    for (int r = 0; r < H; r++) {
        float *cr = c + (size_t)r * cs;
        if (last) {
            acc[2 * r] = _mm256_mul_ps(acc[2 * r], sc);
            acc[2 * r + 1] = _mm256_mul_ps(acc[2 * r + 1], sc);
        }
        _mm256_storeu_ps(cr, acc[2 * r]);
        _mm256_storeu_ps(cr + 8, acc[2 * r + 1]);
    }
}

PAIRS_INLINE void pairs_tile(const float *a, size_t as, const int H, const uint16_t *bj, int ks, int first, int last,
                             float scale, float *c, size_t cs)
{
    pairs_tile_pf(a, as, H, bj, ks, first, last, scale, c, cs, NULL);
}

/* 16 bf16 rows ([16][row_stride], 2 * npairs values each) as one block of lanes: pair p of row e goes to
 * tile + p * 32 + 2 * e. */
PAIRS_INLINE void pairs_pack16(const uint16_t *rows, size_t row_stride, int npairs, uint16_t *tile)
{
    int p = 0;
    for (; p + 8 <= npairs; p += 8)
        for (int e0 = 0; e0 < 16; e0 += 8) {
            __m256i r[8];
            for (int i = 0; i < 8; i++)
                r[i] = _mm256_loadu_si256((const __m256i *)(rows + (size_t)(e0 + i) * row_stride + 2 * p));
            transpose8x8_epi32(r);
            for (int i = 0; i < 8; i++)
                _mm256_storeu_si256((__m256i *)(tile + (size_t)(p + i) * 32 + 2 * e0), r[i]);
        }
    for (; p < npairs; p++)
        for (int e = 0; e < 16; e++) {
            uint32_t v;
            memcpy(&v, rows + (size_t)e * row_stride + 2 * p, 4);
            memcpy(tile + (size_t)p * 32 + 2 * e, &v, 4);
        }
}

#endif
