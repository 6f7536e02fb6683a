/* Few-row linear maps y[m][n] = sum_k x[m][k] * W[n][k] straight from row-major weights (no packing):
 * each 64-byte piece of four weight rows meets up to four activation rows, 16 accumulators, and every
 * accumulator is reduced once at the end. For the decode sizes where oneDNN's matmuls run far below
 * the memory speed (docs/PERFORMANCE.md). */
#include <immintrin.h>

#include "dispatch.h"
#include "internal.h"

#define INLINE static inline __attribute__((always_inline))

/* Lane sums in a fixed order; integer lanes wrap (no undefined behaviour). */
INLINE int32_t sum_epi32(__m512i v)
{
    __m256i a = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    __m128i b = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    b = _mm_add_epi32(b, _mm_shuffle_epi32(b, 0x4e));
    b = _mm_add_epi32(b, _mm_shuffle_epi32(b, 0xb1));
    return _mm_cvtsi128_si32(b);
}

INLINE float sum_ps(__m512 v)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_shuffle_ps(b, b, 0x4e));
    b = _mm_add_ps(b, _mm_shuffle_ps(b, b, 0xb1));
    return _mm_cvtss_f32(b);
}

INLINE __mmask32 tail32(int left) { return left >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << left) - 1); }
INLINE __mmask64 tail64(int left) { return left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1); }

/* NT weight rows x MT activation rows, bf16; `next` (or NULL): the following rows, fetched meanwhile
 * (weight rows are short streams that the hardware prefetcher starts too late). */
INLINE void bf16_tile(const uint16_t *x, size_t ldx, const int MT, const uint16_t *w, size_t ldw, const int NT, int K,
                      float *y, size_t ldy, const uint16_t *next)
{
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int n = 0; n < NT; n++)
#pragma GCC unroll 4
        for (int m = 0; m < MT; m++)
            acc[n][m] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        __m512bh wv[4], xv[4];
        if (next)
            for (int n = 0; n < 4; n++)
                _mm_prefetch((const char *)(next + (size_t)n * ldw + k), _MM_HINT_T0);
#pragma GCC unroll 4
        for (int n = 0; n < NT; n++)
            wv[n] = (__m512bh)_mm512_loadu_si512(w + (size_t)n * ldw + k);
#pragma GCC unroll 4
        for (int m = 0; m < MT; m++)
            xv[m] = (__m512bh)_mm512_loadu_si512(x + (size_t)m * ldx + k);
#pragma GCC unroll 4
        for (int n = 0; n < NT; n++)
#pragma GCC unroll 4
            for (int m = 0; m < MT; m++)
                acc[n][m] = _mm512_dpbf16_ps(acc[n][m], wv[n], xv[m]);
    }
    if (k < K) { /* zeroed tail lanes add nothing */
        __mmask32 t = tail32(K - k);
        __m512bh wv[4], xv[4];
#pragma GCC unroll 4
        for (int n = 0; n < NT; n++)
            wv[n] = (__m512bh)_mm512_maskz_loadu_epi16(t, w + (size_t)n * ldw + k);
#pragma GCC unroll 4
        for (int m = 0; m < MT; m++)
            xv[m] = (__m512bh)_mm512_maskz_loadu_epi16(t, x + (size_t)m * ldx + k);
#pragma GCC unroll 4
        for (int n = 0; n < NT; n++)
#pragma GCC unroll 4
            for (int m = 0; m < MT; m++)
                acc[n][m] = _mm512_dpbf16_ps(acc[n][m], wv[n], xv[m]);
    }
#pragma GCC unroll 4
    for (int n = 0; n < NT; n++)
#pragma GCC unroll 4
        for (int m = 0; m < MT; m++)
            y[(size_t)m * ldy + n] = sum_ps(acc[n][m]);
}

/* NT weight rows x MT activation rows, int8: xb holds x + 128 (the unsigned operand of vpdpbusd),
 * so the sums carry 128 * sum_k W[n][k] too, removed with wsum128[n]. `next` as for bf16_tile. */
INLINE void s8_tile(const uint8_t *xb, size_t ldx, const int MT, const int8_t *w, size_t ldw, const int NT, int K,
                    const int32_t *wsum128, int32_t *y, size_t ldy, const int8_t *next)
{
    __m512i acc[4][4];
#pragma GCC unroll 4
    for (int n = 0; n < NT; n++)
#pragma GCC unroll 4
        for (int m = 0; m < MT; m++)
            acc[n][m] = _mm512_setzero_si512();
    for (int k = 0; k < K; k += 64) {
        __mmask64 t = tail64(K - k);
        bool full = K - k >= 64;
        __m512i wv[4], xv[4];
        if (next)
            for (int n = 0; n < 4; n++)
                _mm_prefetch((const char *)(next + (size_t)n * ldw + k), _MM_HINT_T0);
#pragma GCC unroll 4
        for (int n = 0; n < NT; n++)
            wv[n] = full ? _mm512_loadu_si512(w + (size_t)n * ldw + k) : _mm512_maskz_loadu_epi8(t, w + (size_t)n * ldw + k);
#pragma GCC unroll 4
        for (int m = 0; m < MT; m++)
            xv[m] = full ? _mm512_loadu_si512(xb + (size_t)m * ldx + k) : _mm512_maskz_loadu_epi8(t, xb + (size_t)m * ldx + k);
#pragma GCC unroll 4
        for (int n = 0; n < NT; n++)
#pragma GCC unroll 4
            for (int m = 0; m < MT; m++)
                acc[n][m] = _mm512_dpbusd_epi32(acc[n][m], xv[m], wv[n]);
    }
#pragma GCC unroll 4
    for (int n = 0; n < NT; n++)
#pragma GCC unroll 4
        for (int m = 0; m < MT; m++)
            y[(size_t)m * ldy + n] = (int32_t)((uint32_t)sum_epi32(acc[n][m]) - (uint32_t)wsum128[n]);
}

INLINE void bf16_rows(const uint16_t *x, size_t ldx, int M, const uint16_t *w, size_t ldw, int K, float *y,
                      size_t ldy, const int NT, const uint16_t *next)
{
    for (int m0 = 0; m0 < M; m0 += 4) {
        int mt = M - m0 < 4 ? M - m0 : 4;
        const uint16_t *xm = x + (size_t)m0 * ldx, *nx = m0 == 0 ? next : NULL; /* later passes hit L1/L2 */
        float *ym = y + (size_t)m0 * ldy;
        switch (mt) {
        case 4: bf16_tile(xm, ldx, 4, w, ldw, NT, K, ym, ldy, nx); break;
        case 3: bf16_tile(xm, ldx, 3, w, ldw, NT, K, ym, ldy, nx); break;
        case 2: bf16_tile(xm, ldx, 2, w, ldw, NT, K, ym, ldy, nx); break;
        default: bf16_tile(xm, ldx, 1, w, ldw, NT, K, ym, ldy, nx); break;
        }
    }
}

static void rowdot_bf16__avx512bf16(const uint16_t *x, size_t ldx, int M, const uint16_t *w, size_t ldw, int N,
                                    int K, float *y, size_t ldy)
{
    int n = 0;
    for (; n + 4 <= N; n += 4)
        bf16_rows(x, ldx, M, w + (size_t)n * ldw, ldw, K, y + n, ldy, 4,
                  n + 8 <= N ? w + (size_t)(n + 4) * ldw : NULL);
    for (; n < N; n++)
        bf16_rows(x, ldx, M, w + (size_t)n * ldw, ldw, K, y + n, ldy, 1, NULL);
}

INLINE void s8_rows(const uint8_t *xb, size_t ldx, int M, const int8_t *w, size_t ldw, int K, const int32_t *wsum128,
                    int32_t *y, size_t ldy, const int NT, const int8_t *next)
{
    for (int m0 = 0; m0 < M; m0 += 4) {
        int mt = M - m0 < 4 ? M - m0 : 4;
        const uint8_t *xm = xb + (size_t)m0 * ldx;
        const int8_t *nx = m0 == 0 ? next : NULL;
        int32_t *ym = y + (size_t)m0 * ldy;
        switch (mt) {
        case 4: s8_tile(xm, ldx, 4, w, ldw, NT, K, wsum128, ym, ldy, nx); break;
        case 3: s8_tile(xm, ldx, 3, w, ldw, NT, K, wsum128, ym, ldy, nx); break;
        case 2: s8_tile(xm, ldx, 2, w, ldw, NT, K, wsum128, ym, ldy, nx); break;
        default: s8_tile(xm, ldx, 1, w, ldw, NT, K, wsum128, ym, ldy, nx); break;
        }
    }
}

static void rowdot_s8__avx512bf16(const uint8_t *xb, size_t ldx, int M, const int8_t *w, size_t ldw, int N, int K,
                                  const int32_t *wsum128, int32_t *y, size_t ldy)
{
    int n = 0;
    for (; n + 4 <= N; n += 4)
        s8_rows(xb, ldx, M, w + (size_t)n * ldw, ldw, K, wsum128 + n, y + n, ldy, 4,
                n + 8 <= N ? w + (size_t)(n + 4) * ldw : NULL);
    for (; n < N; n++)
        s8_rows(xb, ldx, M, w + (size_t)n * ldw, ldw, K, wsum128 + n, y + n, ldy, 1, NULL);
}

const dsops_linear_kernels dsops_linear_kernels__avx512bf16 = {
    .rowdot_bf16 = rowdot_bf16__avx512bf16,
    .rowdot_s8 = rowdot_s8__avx512bf16,
};
