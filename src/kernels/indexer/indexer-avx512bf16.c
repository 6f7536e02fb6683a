/* Lightning-indexer micro-kernels for AVX-512 with VNNI (vpdpbusd) and BF16 (vdpbf16ps): 16 keys per
 * vector, query quads / pairs broadcast, the per-head epilogue (ReLU, fp16 rounding, weight) applied
 * in registers and summed over heads. */
#include <immintrin.h>
#include <math.h>

#include "../common/transpose-avx512.h"
#include "dispatch.h"
#include "indexer.h"
#include "internal.h"

#define INLINE static inline __attribute__((always_inline))

/* Register tile: ROWS heads x TILES key tiles. */
#ifndef IDX_ROWS
#define IDX_ROWS 4
#endif
#ifndef IDX_TILES
#define IDX_TILES 4
#endif
#define IDX_MAX_ROWS (IDX_ROWS > 4 ? IDX_ROWS : 4)

INLINE __m512i bcst32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* ---- packing ---------------------------------------------------------------------------------- */

/* 16 rows of di bytes (or padding) -> [dquads][16][4] with bytes biased by 128: a 16x16 transpose of
 * 32-bit quads per 64 bytes of the rows. */
static void pack_int8__avx512bf16(const int8_t *const *rows, int di, void *tilev)
{
    uint8_t *tile = tilev;
    int dquads = (di + 3) / 4;
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int q0 = 0; q0 < dquads; q0 += 16) {
        int nq = dquads - q0 < 16 ? dquads - q0 : 16;
        int bytes = di - 4 * q0 < 64 ? di - 4 * q0 : 64;
        __mmask64 m = bytes >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << bytes) - 1);
        __m512i r[16];
        for (int e = 0; e < 16; e++) {
            /* plain loads for whole 64-byte pieces: masked byte loads are much slower */
            __m512i x = !rows[e]       ? _mm512_setzero_si512()
                        : bytes == 64 ? _mm512_loadu_si512(rows[e] + 4 * q0)
                                      : _mm512_maskz_loadu_epi8(m, rows[e] + 4 * q0);
            r[e] = _mm512_xor_si512(x, bias);
        }
        transpose16x16_epi32(r);
        for (int k = 0; k < nq; k++)
            _mm512_storeu_si512(tile + (size_t)(q0 + k) * 64, r[k]);
    }
}

static void pack_bf16__avx512bf16(const uint16_t *const *rows, int di, void *tilev)
{
    uint16_t *tile = tilev;
    int dpairs = (di + 1) / 2;
    for (int p0 = 0; p0 < dpairs; p0 += 16) {
        int np = dpairs - p0 < 16 ? dpairs - p0 : 16;
        int elems = di - 2 * p0 < 32 ? di - 2 * p0 : 32;
        __mmask32 m = elems >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << elems) - 1);
        __m512i r[16];
        for (int e = 0; e < 16; e++)
            r[e] = !rows[e]       ? _mm512_setzero_si512()
                   : elems == 32 ? _mm512_loadu_si512(rows[e] + 2 * p0)
                                 : _mm512_maskz_loadu_epi16(m, rows[e] + 2 * p0);
        transpose16x16_epi32(r);
        for (int k = 0; k < np; k++)
            _mm512_storeu_si512(tile + (size_t)(p0 + k) * 32, r[k]);
    }
}

/* ---- int8 scores -------------------------------------------------------------------------------- */

/* Adds, for RT heads, ws[h] * fp16(f32(max(dot, 0)) * 2^-11) to sum[j] of JT key tiles. Heads are
 * added in ascending order whatever the tile shape. */
INLINE void int8_tile(const int8_t *q, size_t q_stride, const int32_t *qsum128, const float *ws, const int RT,
                      const uint8_t *tiles, size_t tile_bytes, const int JT, int dquads, __m512 *sum)
{
    __m512i acc[IDX_MAX_ROWS][IDX_TILES];
#pragma GCC unroll 16
    for (int r = 0; r < RT; r++)
#pragma GCC unroll 16
        for (int j = 0; j < JT; j++)
            acc[r][j] = _mm512_setzero_si512();
    for (int k = 0; k < dquads; k++) {
        __m512i v[IDX_TILES];
#pragma GCC unroll 16
        for (int j = 0; j < JT; j++)
            v[j] = _mm512_loadu_si512(tiles + (size_t)j * tile_bytes + (size_t)k * 64);
#pragma GCC unroll 16
        for (int r = 0; r < RT; r++) {
            __m512i qb = bcst32(q + (size_t)r * q_stride + 4 * k);
#pragma GCC unroll 16
            for (int j = 0; j < JT; j++)
                acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], v[j], qb);
        }
    }
    const __m512 guard = _mm512_set1_ps(0x1p-11f);
#pragma GCC unroll 16
    for (int r = 0; r < RT; r++) {
        __m512i corr = _mm512_set1_epi32(qsum128[r]);
        __m512 w = _mm512_set1_ps(ws[r]);
#pragma GCC unroll 16
        for (int j = 0; j < JT; j++) {
            __m512i dot = _mm512_max_epi32(_mm512_sub_epi32(acc[r][j], corr), _mm512_setzero_si512());
            __m512 d = _mm512_mul_ps(_mm512_cvtepi32_ps(dot), guard);
            d = _mm512_cvtph_ps(_mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            sum[j] = _mm512_fmadd_ps(w, d, sum[j]);
        }
    }
}

INLINE void int8_tiles(const int8_t *q, size_t q_stride, const int32_t *qsum128, const float *ws, int nh,
                       const uint8_t *tiles, size_t tile_bytes, const int JT, int dquads, const float *kscale,
                       float *I)
{
    __m512 sum[IDX_TILES];
#pragma GCC unroll 16
    for (int j = 0; j < JT; j++)
        sum[j] = _mm512_setzero_ps();
    int h = 0;
    for (; h + IDX_ROWS <= nh; h += IDX_ROWS)
        int8_tile(q + h * q_stride, q_stride, qsum128 + h, ws + h, IDX_ROWS, tiles, tile_bytes, JT, dquads, sum);
    for (; h + 2 <= nh; h += 2)
        int8_tile(q + h * q_stride, q_stride, qsum128 + h, ws + h, 2, tiles, tile_bytes, JT, dquads, sum);
    for (; h < nh; h++)
        int8_tile(q + h * q_stride, q_stride, qsum128 + h, ws + h, 1, tiles, tile_bytes, JT, dquads, sum);
#pragma GCC unroll 16
    for (int j = 0; j < JT; j++)
        _mm512_storeu_ps(I + j * 16, _mm512_mul_ps(sum[j], _mm512_loadu_ps(kscale + j * 16)));
}

static void score_int8__avx512bf16(const void *qv, size_t q_stride, const int32_t *qsum128, const float *ws,
                                   int nh, const void *tilesv, int ntiles, int di, const float *kscale, float *I)
{
    const int8_t *q = qv; /* rows q_stride bytes apart */
    const uint8_t *tiles = tilesv;
    int dquads = (di + 3) / 4;
    size_t tile_bytes = (size_t)dquads * 64;
    int t = 0;
    for (; t + IDX_TILES <= ntiles; t += IDX_TILES)
        int8_tiles(q, q_stride, qsum128, ws, nh, tiles + t * tile_bytes, tile_bytes, IDX_TILES, dquads,
                   kscale + t * 16, I + t * 16);
    for (; t < ntiles; t++)
        int8_tiles(q, q_stride, qsum128, ws, nh, tiles + t * tile_bytes, tile_bytes, 1, dquads, kscale + t * 16,
                   I + t * 16);
}

/* ---- bf16 scores -------------------------------------------------------------------------------- */

INLINE void bf16_tile(const uint16_t *q, size_t q_stride, const float *w, const int RT, const uint16_t *tiles,
                      size_t tile_elems, const int JT, int dpairs, __m512 *sum)
{
    __m512 acc[IDX_MAX_ROWS][IDX_TILES];
#pragma GCC unroll 16
    for (int r = 0; r < RT; r++)
#pragma GCC unroll 16
        for (int j = 0; j < JT; j++)
            acc[r][j] = _mm512_setzero_ps();
    for (int k = 0; k < dpairs; k++) {
        __m512bh v[IDX_TILES];
#pragma GCC unroll 16
        for (int j = 0; j < JT; j++)
            v[j] = (__m512bh)_mm512_loadu_si512(tiles + (size_t)j * tile_elems + (size_t)k * 32);
#pragma GCC unroll 16
        for (int r = 0; r < RT; r++) {
            __m512bh qb = (__m512bh)bcst32(q + (size_t)r * q_stride + 2 * k);
#pragma GCC unroll 16
            for (int j = 0; j < JT; j++)
                acc[r][j] = _mm512_dpbf16_ps(acc[r][j], qb, v[j]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < RT; r++) {
        __m512 wv = _mm512_set1_ps(w[r]);
#pragma GCC unroll 16
        for (int j = 0; j < JT; j++)
            /* max_ps(0, dot): a NaN dot is kept (the second operand wins), as spec §3.6 wants */
            sum[j] = _mm512_fmadd_ps(_mm512_max_ps(_mm512_setzero_ps(), acc[r][j]), wv, sum[j]);
    }
}

INLINE void bf16_tiles(const uint16_t *q, size_t q_stride, const float *w, int nh, const uint16_t *tiles,
                       size_t tile_elems, const int JT, int dpairs, float *I)
{
    __m512 sum[IDX_TILES];
#pragma GCC unroll 16
    for (int j = 0; j < JT; j++)
        sum[j] = _mm512_setzero_ps();
    int h = 0;
    for (; h + IDX_ROWS <= nh; h += IDX_ROWS)
        bf16_tile(q + h * q_stride, q_stride, w + h, IDX_ROWS, tiles, tile_elems, JT, dpairs, sum);
    for (; h + 2 <= nh; h += 2)
        bf16_tile(q + h * q_stride, q_stride, w + h, 2, tiles, tile_elems, JT, dpairs, sum);
    for (; h < nh; h++)
        bf16_tile(q + h * q_stride, q_stride, w + h, 1, tiles, tile_elems, JT, dpairs, sum);
#pragma GCC unroll 16
    for (int j = 0; j < JT; j++)
        _mm512_storeu_ps(I + j * 16, sum[j]);
}

static void score_bf16__avx512bf16(const void *qv, size_t q_stride_bytes, const float *w, int nh,
                                   const void *tilesv, int ntiles, int di, float *I)
{
    const uint16_t *q = qv, *tiles = tilesv;
    size_t q_stride = q_stride_bytes / 2; /* in bf16 elements */
    int dpairs = (di + 1) / 2;
    size_t tile_elems = (size_t)dpairs * 32;
    int t = 0;
    for (; t + IDX_TILES <= ntiles; t += IDX_TILES)
        bf16_tiles(q, q_stride, w, nh, tiles + t * tile_elems, tile_elems, IDX_TILES, dpairs, I + t * 16);
    for (; t < ntiles; t++)
        bf16_tiles(q, q_stride, w, nh, tiles + t * tile_elems, tile_elems, 1, dpairs, I + t * 16);
}

const dsops_indexer_kernels dsops_indexer_kernels__avx512bf16 = {
    /* the scalar tier's layouts (the avx2 tier, below this one, has its own) */
    .layout_int8 = dsops_indexer_layout_int8_quads,
    .layout_bf16 = dsops_indexer_layout_bf16_pairs,
    .pack_query_int8 = dsops_indexer_pack_query_int8_quads,
    .pack_query_bf16 = dsops_indexer_pack_query_bf16_pairs,
    .pack_int8 = pack_int8__avx512bf16,
    .pack_bf16 = pack_bf16__avx512bf16,
    .score_int8 = score_int8__avx512bf16,
    .score_bf16 = score_bf16__avx512bf16,
};
