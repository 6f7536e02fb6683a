/* Lightning-indexer kernels for AVX2 + FMA + F16C, on this tier's own layouts (indexer.h):
 * keys and queries are widened once, when packed, so the scoring loops do nothing but multiply-adds.
 *  int8: tile [P][16][2] int16 (P = ceil(di/2) dim pairs), query [P][2] int16; vpmaddwd + vpaddd.
 *  bf16: tile [2P][16] fp32, query [2P] fp32; vfmadd231ps.
 * Register tile: heads x 16 keys (2 key vectors, one query broadcast, 2 accumulators per head); the tile
 * (4 or 8 KB for DI 128) and the queries stay in L1 while all heads pass over it. Measured in L1 (DI 128,
 * 64 heads, GCC -O3): int8 with 3 / 4 / 5 / 6 heads 129-136 / 134 / 85 / 88-93 GOP/s (from 5 heads on the
 * compiler spills accumulators), bf16 with 4 / 6 heads 88-94 / 93-96 GFLOP/s.
 *
 * Exactness of the int8 dots. vpmaddwd multiplies signed 16-bit lanes and adds each pair of products
 * into 32 bits. Both operands are sign-extended int8 values in [-128, 127], so a product lies in
 * [-16256, 16384] and a pair sum in [-32512, 32768]: the one case where vpmaddwd wraps (both products
 * (-32768)^2) cannot arise, and every pair sum is exact. (vpmaddubsw is not used: its 16-bit pair sums
 * saturate, e.g. 2 * 255 * 127 for biased keys.) The pair sums are accumulated with vpaddd, which wraps
 * modulo 2^32 exactly as the other tiers' accumulators do; |dot| <= DI * 2^14 <= 2^31 (DI <= 131072),
 * so every dot is exact except dot = +2^31 (DI = 131072, all q and k -128), which all tiers alike wrap
 * to -2^31. */
#include <immintrin.h>

#include "../common/transpose-avx2.h"
#include "dispatch.h"
#include "internal.h"

#define INLINE static inline __attribute__((always_inline))

/* Heads per register tile. */
#define LI_ROWS_INT8 4
#define LI_ROWS_BF16 6

/* ---- layouts and packing ---------------------------------------------------------------------- */

/* One tile per chunk: scoring takes one tile at a time, and a just-packed tile is still in L1 (chunks of
 * 1, 2, 4, 8 tiles measured 78.5, 76, 75.5, 74 GOP/s int8 and 70, 69, 61, 61 GFLOP/s bf16, DI 128). */
static void layout_int8__avx2(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles)
{
    size_t pairs = (size_t)(di + 1) / 2;
    *tile_bytes = pairs * 64;
    *query_bytes = dsops_align64(pairs * 4);
    *chunk_tiles = 1;
}

static void layout_bf16__avx2(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles)
{
    size_t pairs = (size_t)(di + 1) / 2;
    *tile_bytes = pairs * 128;
    *query_bytes = dsops_align64(pairs * 8);
    *chunk_tiles = 1;
}

static int32_t pack_query_int8__avx2(const int8_t *src, int di, void *dst)
{
    int16_t *q = dst;
    int padded = (di + 1) / 2 * 2, d = 0;
    for (; d + 16 <= di; d += 16)
        _mm256_storeu_si256((__m256i *)(q + d), _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(src + d))));
    for (; d < padded; d++)
        q[d] = d < di ? src[d] : 0;
    return 0; /* keys are signed: nothing to remove */
}

static void pack_query_bf16__avx2(const uint16_t *src, int di, void *dst)
{
    float *q = dst;
    int padded = (di + 1) / 2 * 2, d = 0;
    for (; d + 8 <= di; d += 8) {
        __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + d)));
        _mm256_storeu_ps(q + d, _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)));
    }
    for (; d < padded; d++)
        q[d] = d < di ? dsops_bf16_value(src[d]) : 0.0f;
}

/* Row e's bytes [off, off + n) followed by zeros, for the last partial block of a row or a padding key. */
INLINE void stage_row(const void *row, size_t off, size_t n, void *buf, size_t bytes)
{
    memset(buf, 0, bytes);
    if (row && n > 0)
        memcpy(buf, (const char *)row + off, n);
}

/* 16 int8 rows -> [P][16][2] int16: per 8 keys x 8 dim pairs, sign-extend 16 bytes of each row into 8
 * 32-bit pairs, then an 8x8 transpose puts the 8 keys of one pair side by side. */
static void pack_int8__avx2(const int8_t *const *rows, int di, void *tilev)
{
    int16_t *tile = tilev;
    int pairs = (di + 1) / 2;
    for (int p0 = 0; p0 < pairs; p0 += 8) {
        int np = pairs - p0 < 8 ? pairs - p0 : 8;
        size_t off = (size_t)p0 * 2;
        bool full = (size_t)di >= off + 16;
        for (int half = 0; half < 2; half++) {
            __m256i r[8];
            for (int e = 0; e < 8; e++) {
                const int8_t *row = rows[half * 8 + e];
                if (row && full) {
                    r[e] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(row + off)));
                } else {
                    int8_t buf[16];
                    stage_row(row, off, full ? 16 : (size_t)di - off, buf, sizeof buf);
                    r[e] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)buf));
                }
            }
            transpose8x8_epi32(r);
            for (int k = 0; k < np; k++)
                _mm256_storeu_si256((__m256i *)(tile + (size_t)(p0 + k) * 32 + half * 16), r[k]);
        }
    }
}

/* 16 bf16 rows -> [2P][16] fp32: per 8 keys x 8 dim pairs, an 8x8 transpose of the 32-bit pairs, then
 * each pair vector splits into its even dim (low halves shifted up) and odd dim (high halves). */
static void pack_bf16__avx2(const uint16_t *const *rows, int di, void *tilev)
{
    float *tile = tilev;
    int pairs = (di + 1) / 2;
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    for (int p0 = 0; p0 < pairs; p0 += 8) {
        int np = pairs - p0 < 8 ? pairs - p0 : 8;
        size_t off = (size_t)p0 * 2;
        bool full = (size_t)di >= off + 16;
        for (int half = 0; half < 2; half++) {
            __m256i r[8];
            for (int e = 0; e < 8; e++) {
                const uint16_t *row = rows[half * 8 + e];
                if (row && full) {
                    r[e] = _mm256_loadu_si256((const __m256i *)(row + off));
                } else {
                    uint16_t buf[16];
                    stage_row(row, off * 2, full ? 32 : ((size_t)di - off) * 2, buf, sizeof buf);
                    r[e] = _mm256_loadu_si256((const __m256i *)buf);
                }
            }
            transpose8x8_epi32(r);
            for (int k = 0; k < np; k++) {
                float *dst = tile + (size_t)(p0 + k) * 32 + half * 8;
                _mm256_storeu_ps(dst, _mm256_castsi256_ps(_mm256_slli_epi32(r[k], 16)));
                _mm256_storeu_ps(dst + 16, _mm256_castsi256_ps(_mm256_and_si256(r[k], hi)));
            }
        }
    }
}

/* ---- int8 scores -------------------------------------------------------------------------------- */

/* I[0..15] += ws[r] * fp16(f32(max(dot, 0)) * 2^-11) for R heads (ascending) of one tile. q: the first
 * head's pairs as 32-bit words, qs words apart; tile: [pairs][16] 32-bit words. */
INLINE void int8_heads(const int32_t *q, size_t qs, const float *ws, const int R, const int32_t *tile, int pairs,
                       float *I)
{
    __m256i acc[LI_ROWS_INT8][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int p = 0; p < pairs; p++) {
        __m256i k0 = _mm256_loadu_si256((const __m256i *)(tile + (size_t)p * 16));
        __m256i k1 = _mm256_loadu_si256((const __m256i *)(tile + (size_t)p * 16 + 8));
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m256i qb = _mm256_set1_epi32(q[(size_t)r * qs + p]);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(k0, qb));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(k1, qb));
        }
    }
    const __m256 guard = _mm256_set1_ps(0x1p-11f);
    __m256 s0 = _mm256_loadu_ps(I), s1 = _mm256_loadu_ps(I + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        __m256 w = _mm256_set1_ps(ws[r]);
        for (int j = 0; j < 2; j++) {
            __m256i dot = _mm256_max_epi32(acc[r][j], _mm256_setzero_si256());
            __m256 d = _mm256_mul_ps(_mm256_cvtepi32_ps(dot), guard);
            d = _mm256_cvtph_ps(_mm256_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            if (j == 0)
                s0 = _mm256_fmadd_ps(w, d, s0);
            else
                s1 = _mm256_fmadd_ps(w, d, s1);
        }
    }
    _mm256_storeu_ps(I, s0);
    _mm256_storeu_ps(I + 8, s1);
}

static void score_int8__avx2(const void *qv, size_t q_stride, const int32_t *qbias, const float *ws, int nh,
                             const void *tilesv, int ntiles, int di, const float *kscale, float *I)
{
    (void)qbias; /* signed keys: no bias */
    const int32_t *q = qv;
    size_t qs = q_stride / 4;
    int pairs = (di + 1) / 2;
    for (int t = 0; t < ntiles; t++) {
        const int32_t *tile = (const int32_t *)tilesv + (size_t)t * pairs * 16;
        float *It = I + (size_t)t * 16;
        _mm256_storeu_ps(It, _mm256_setzero_ps());
        _mm256_storeu_ps(It + 8, _mm256_setzero_ps());
        int h = 0;
        for (; h + LI_ROWS_INT8 <= nh; h += LI_ROWS_INT8)
            int8_heads(q + h * qs, qs, ws + h, LI_ROWS_INT8, tile, pairs, It);
        switch (nh - h) {
        case 3: int8_heads(q + h * qs, qs, ws + h, 3, tile, pairs, It); break;
        case 2: int8_heads(q + h * qs, qs, ws + h, 2, tile, pairs, It); break;
        case 1: int8_heads(q + h * qs, qs, ws + h, 1, tile, pairs, It); break;
        default: break;
        }
        for (int half = 0; half < 2; half++)
            _mm256_storeu_ps(It + half * 8, _mm256_mul_ps(_mm256_loadu_ps(It + half * 8),
                                                          _mm256_loadu_ps(kscale + t * 16 + half * 8)));
    }
}

/* ---- bf16 scores -------------------------------------------------------------------------------- */

/* I[0..15] += max(dot, 0) * w[r] for R heads (ascending) of one tile; q: fp32 rows qs floats apart,
 * tile: [dims][16] fp32. max_ps(0, dot) returns dot when it is NaN (its second operand), as spec §3.6
 * wants; max_ps(dot, 0) would turn a NaN score into 0. */
INLINE void bf16_heads(const float *q, size_t qs, const float *w, const int R, const float *tile, int dims, float *I)
{
    __m256 acc[LI_ROWS_BF16][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
#pragma GCC unroll 2
    for (int d = 0; d < dims; d++) {
        __m256 k0 = _mm256_loadu_ps(tile + (size_t)d * 16);
        __m256 k1 = _mm256_loadu_ps(tile + (size_t)d * 16 + 8);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m256 qb = _mm256_broadcast_ss(q + (size_t)r * qs + d);
            acc[r][0] = _mm256_fmadd_ps(qb, k0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(qb, k1, acc[r][1]);
        }
    }
    __m256 s0 = _mm256_loadu_ps(I), s1 = _mm256_loadu_ps(I + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        __m256 wv = _mm256_set1_ps(w[r]);
        s0 = _mm256_fmadd_ps(_mm256_max_ps(_mm256_setzero_ps(), acc[r][0]), wv, s0);
        s1 = _mm256_fmadd_ps(_mm256_max_ps(_mm256_setzero_ps(), acc[r][1]), wv, s1);
    }
    _mm256_storeu_ps(I, s0);
    _mm256_storeu_ps(I + 8, s1);
}

static void score_bf16__avx2(const void *qv, size_t q_stride, const float *w, int nh, const void *tilesv, int ntiles,
                             int di, float *I)
{
    const float *q = qv;
    size_t qs = q_stride / 4;
    int dims = (di + 1) / 2 * 2;
    for (int t = 0; t < ntiles; t++) {
        const float *tile = (const float *)tilesv + (size_t)t * dims * 16;
        float *It = I + (size_t)t * 16;
        _mm256_storeu_ps(It, _mm256_setzero_ps());
        _mm256_storeu_ps(It + 8, _mm256_setzero_ps());
        int h = 0;
        for (; h + LI_ROWS_BF16 <= nh; h += LI_ROWS_BF16)
            bf16_heads(q + h * qs, qs, w + h, LI_ROWS_BF16, tile, dims, It);
        switch (nh - h) {
        case 5: bf16_heads(q + h * qs, qs, w + h, 5, tile, dims, It); break;
        case 4: bf16_heads(q + h * qs, qs, w + h, 4, tile, dims, It); break;
        case 3: bf16_heads(q + h * qs, qs, w + h, 3, tile, dims, It); break;
        case 2: bf16_heads(q + h * qs, qs, w + h, 2, tile, dims, It); break;
        case 1: bf16_heads(q + h * qs, qs, w + h, 1, tile, dims, It); break;
        default: break;
        }
    }
}

const dsops_indexer_kernels dsops_indexer_kernels__avx2 = {
    .layout_int8 = layout_int8__avx2,
    .layout_bf16 = layout_bf16__avx2,
    .pack_query_int8 = pack_query_int8__avx2,
    .pack_query_bf16 = pack_query_bf16__avx2,
    .pack_int8 = pack_int8__avx2,
    .pack_bf16 = pack_bf16__avx2,
    .score_int8 = score_int8__avx2,
    .score_bf16 = score_bf16__avx2,
};
