/* Few-row linear maps y[m][n] = sum_k x[m][k] * W[n][k] from row-major weights (no packing), AVX2 + FMA.
 * A register tile is 4 weight rows x 2 activation rows: 8 accumulators, the widened activations (4
 * registers) and one widened weight vector fit the 16 ymm registers. Each weight vector is loaded once
 * per tile and serves both activation rows; the weight rows of a tile are re-read from L1/L2 by the
 * next pair of activation rows, and the following 4 rows are prefetched during the first pass.
 *
 * bf16: a 32-byte load holds 16 values; the even ones widen by a shift, the odd ones by a mask (exact),
 * and both halves meet the same halves of x in fp32 FMAs. Lanes are summed in a fixed order at the end.
 *
 * int8: exact int32 sums, without vpmaddubsw (its int16 pair sums saturate: 255 * 127 * 2 > 32767).
 * The biased activations xb = x + 128 are zero-extended and the weights sign-extended to int16, and
 * vpmaddwd adds pairs of products into int32: |xb w| <= 255 * 128 = 32640, so a pair sum lies in
 * [-65280, 64770] and is exact. Lanes then add these in int32 with wrap-around (vpaddd), and the tile
 * subtracts wsum128[n] = 128 sum_k W[n][k] in the same modular arithmetic: the result is the true
 * sum_k x W modulo 2^32, hence exact whenever it fits int32 (always for K < 2^17, as |x W| <= 2^14). */
#include <immintrin.h>
#include <string.h>

#include "dispatch.h"

#define INLINE static inline __attribute__((always_inline))
#define NT 4 /* weight rows per tile */
#define MT 2 /* activation rows per tile (at most) */

INLINE float hsum_ps(__m256 v)
{
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_add_ps(b, _mm_shuffle_ps(b, b, 0x4e));
    b = _mm_add_ps(b, _mm_shuffle_ps(b, b, 0xb1));
    return _mm_cvtss_f32(b);
}

INLINE uint32_t hsum_epi32(__m256i v)
{
    __m128i b = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    b = _mm_add_epi32(b, _mm_shuffle_epi32(b, 0x4e));
    b = _mm_add_epi32(b, _mm_shuffle_epi32(b, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(b);
}

INLINE __m256 even_f32(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }
INLINE __m256 odd_f32(__m256i v) { return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u))); }

/* One 16-value step of a bf16 tile: xr[m] / wr[n] point at the step's values. */
INLINE void bf16_step(const uint16_t *const *xr, const int mt, const uint16_t *const *wr, const int nt,
                      __m256 acc[NT][MT])
{
    __m256 xe[MT], xo[MT];
#pragma GCC unroll 2
    for (int m = 0; m < mt; m++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)xr[m]);
        xe[m] = even_f32(v);
        xo[m] = odd_f32(v);
    }
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)wr[n]);
        __m256 we = even_f32(v), wo = odd_f32(v);
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            acc[n][m] = _mm256_fmadd_ps(wo, xo[m], _mm256_fmadd_ps(we, xe[m], acc[n][m]));
    }
}

/* nt weight rows x mt activation rows; `next` (or NULL): the following NT weight rows, fetched meanwhile
 * (a weight row is a short stream that the hardware prefetcher picks up late). */
INLINE void bf16_tile(const uint16_t *x, size_t ldx, const int mt, const uint16_t *w, size_t ldw, const int nt, int K,
                      float *y, size_t ldy, const uint16_t *next)
{
    __m256 acc[NT][MT];
    const uint16_t *xr[MT], *wr[NT];
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++)
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            acc[n][m] = _mm256_setzero_ps();
    int k = 0;
    for (; k + 32 <= K; k += 32) { /* one 64-byte line of every row per iteration */
        if (next)
            for (int n = 0; n < NT; n++)
                _mm_prefetch((const char *)(next + (size_t)n * ldw + k), _MM_HINT_T0);
        for (int h = 0; h < 32; h += 16) {
            for (int m = 0; m < mt; m++)
                xr[m] = x + (size_t)m * ldx + k + h;
            for (int n = 0; n < nt; n++)
                wr[n] = w + (size_t)n * ldw + k + h;
            bf16_step(xr, mt, wr, nt, acc);
        }
    }
    for (; k < K; k += 16) { /* up to two more steps, the last one zero padded (zeros add nothing) */
        uint16_t xt[MT][16], wt[NT][16];
        int len = K - k < 16 ? K - k : 16;
        for (int m = 0; m < mt; m++) {
            memset(xt[m], 0, sizeof xt[m]);
            memcpy(xt[m], x + (size_t)m * ldx + k, (size_t)len * 2);
            xr[m] = xt[m];
        }
        for (int n = 0; n < nt; n++) {
            memset(wt[n], 0, sizeof wt[n]);
            memcpy(wt[n], w + (size_t)n * ldw + k, (size_t)len * 2);
            wr[n] = wt[n];
        }
        bf16_step(xr, mt, wr, nt, acc);
    }
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++)
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            y[(size_t)m * ldy + n] = hsum_ps(acc[n][m]);
}

/* One 16-value step of an int8 tile (see the file comment for why it is exact). */
INLINE void s8_step(const uint8_t *const *xr, const int mt, const int8_t *const *wr, const int nt, __m256i acc[NT][MT])
{
    __m256i xv[MT];
#pragma GCC unroll 2
    for (int m = 0; m < mt; m++)
        xv[m] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)xr[m]));
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++) {
        __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wr[n]));
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            acc[n][m] = _mm256_add_epi32(acc[n][m], _mm256_madd_epi16(wv, xv[m]));
    }
}

INLINE void s8_tile(const uint8_t *xb, size_t ldx, const int mt, const int8_t *w, size_t ldw, const int nt, int K,
                    const int32_t *wsum128, int32_t *y, size_t ldy, const int8_t *next)
{
    __m256i acc[NT][MT];
    const uint8_t *xr[MT];
    const int8_t *wr[NT];
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++)
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            acc[n][m] = _mm256_setzero_si256();
    int k = 0;
    for (; k + 64 <= K; k += 64) {
        if (next)
            for (int n = 0; n < NT; n++)
                _mm_prefetch((const char *)(next + (size_t)n * ldw + k), _MM_HINT_T0);
        for (int h = 0; h < 64; h += 16) {
            for (int m = 0; m < mt; m++)
                xr[m] = xb + (size_t)m * ldx + k + h;
            for (int n = 0; n < nt; n++)
                wr[n] = w + (size_t)n * ldw + k + h;
            s8_step(xr, mt, wr, nt, acc);
        }
    }
    for (; k < K; k += 16) { /* zero padding: a zero byte of xb or W adds nothing */
        uint8_t xt[MT][16];
        int8_t wt[NT][16];
        int len = K - k < 16 ? K - k : 16;
        for (int m = 0; m < mt; m++) {
            memset(xt[m], 0, sizeof xt[m]);
            memcpy(xt[m], xb + (size_t)m * ldx + k, (size_t)len);
            xr[m] = xt[m];
        }
        for (int n = 0; n < nt; n++) {
            memset(wt[n], 0, sizeof wt[n]);
            memcpy(wt[n], w + (size_t)n * ldw + k, (size_t)len);
            wr[n] = wt[n];
        }
        s8_step(xr, mt, wr, nt, acc);
    }
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++)
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            y[(size_t)m * ldy + n] = (int32_t)(hsum_epi32(acc[n][m]) - (uint32_t)wsum128[n]);
}

/* All activation rows against nt weight rows, in pairs (the weight rows stay in cache between pairs;
 * only the first pass prefetches the next rows). */
INLINE void bf16_rows(const uint16_t *x, size_t ldx, int M, const uint16_t *w, size_t ldw, const int nt, int K,
                      float *y, size_t ldy, const uint16_t *next)
{
    for (int m0 = 0; m0 < M; m0 += MT) {
        const uint16_t *xm = x + (size_t)m0 * ldx, *nx = m0 == 0 ? next : NULL;
        float *ym = y + (size_t)m0 * ldy;
        if (M - m0 >= 2)
            bf16_tile(xm, ldx, 2, w, ldw, nt, K, ym, ldy, nx);
        else
            bf16_tile(xm, ldx, 1, w, ldw, nt, K, ym, ldy, nx);
    }
}

static void rowdot_bf16__avx2(const uint16_t *x, size_t ldx, int M, const uint16_t *w, size_t ldw, int N, int K,
                              float *y, size_t ldy)
{
    int n = 0;
    for (; n + NT <= N; n += NT)
        bf16_rows(x, ldx, M, w + (size_t)n * ldw, ldw, NT, K, y + n, ldy,
                  n + 2 * NT <= N ? w + (size_t)(n + NT) * ldw : NULL);
    for (; n < N; n++)
        bf16_rows(x, ldx, M, w + (size_t)n * ldw, ldw, 1, K, y + n, ldy, NULL);
}

INLINE void s8_rows(const uint8_t *xb, size_t ldx, int M, const int8_t *w, size_t ldw, const int nt, int K,
                    const int32_t *wsum128, int32_t *y, size_t ldy, const int8_t *next)
{
    for (int m0 = 0; m0 < M; m0 += MT) {
        const uint8_t *xm = xb + (size_t)m0 * ldx;
        const int8_t *nx = m0 == 0 ? next : NULL;
        int32_t *ym = y + (size_t)m0 * ldy;
        if (M - m0 >= 2)
            s8_tile(xm, ldx, 2, w, ldw, nt, K, wsum128, ym, ldy, nx);
        else
            s8_tile(xm, ldx, 1, w, ldw, nt, K, wsum128, ym, ldy, nx);
    }
}

static void rowdot_s8__avx2(const uint8_t *xb, size_t ldx, int M, const int8_t *w, size_t ldw, int N, int K,
                            const int32_t *wsum128, int32_t *y, size_t ldy)
{
    int n = 0;
    for (; n + NT <= N; n += NT)
        s8_rows(xb, ldx, M, w + (size_t)n * ldw, ldw, NT, K, wsum128 + n, y + n, ldy,
                n + 2 * NT <= N ? w + (size_t)(n + NT) * ldw : NULL);
    for (; n < N; n++)
        s8_rows(xb, ldx, M, w + (size_t)n * ldw, ldw, 1, K, wsum128 + n, y + n, ldy, NULL);
}

const dsops_linear_kernels dsops_linear_kernels__avx2 = {
    .rowdot_bf16 = rowdot_bf16__avx2,
    .rowdot_s8 = rowdot_s8__avx2,
};
