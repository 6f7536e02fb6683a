/* Lightning-indexer micro-kernels, portable C, on the tile layouts of indexer.h. */
#include <math.h>

#include "dispatch.h"
#include "indexer.h"
#include "internal.h"

/* 8 tiles per chunk: the avx512bf16 scoring takes 4 tiles at a time (docs/PERFORMANCE.md). */
void dsops_indexer_layout_int8_quads(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles)
{
    size_t dquads = (size_t)(di + 3) / 4;
    *tile_bytes = dquads * 64;
    *query_bytes = dsops_align64(dquads * 4);
    *chunk_tiles = 8;
}

void dsops_indexer_layout_bf16_pairs(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles)
{
    size_t dpairs = (size_t)(di + 1) / 2;
    *tile_bytes = dpairs * 64;
    *query_bytes = dsops_align64(dpairs * 4);
    *chunk_tiles = 8;
}

int32_t dsops_indexer_pack_query_int8_quads(const int8_t *src, int di, void *dst)
{
    int8_t *q = dst;
    int padded = (di + 3) / 4 * 4;
    uint32_t sum = 0;
    for (int d = 0; d < padded; d++) {
        q[d] = d < di ? src[d] : 0;
        sum += (uint32_t)(int32_t)q[d];
    }
    return (int32_t)(sum * 128u);
}

void dsops_indexer_pack_query_bf16_pairs(const uint16_t *src, int di, void *dst)
{
    uint16_t *q = dst;
    int padded = (di + 1) / 2 * 2;
    for (int d = 0; d < padded; d++)
        q[d] = d < di ? src[d] : 0;
}

static void pack_int8__scalar(const int8_t *const *rows, int di, void *tilev)
{
    uint8_t *tile = tilev;
    int dquads = (di + 3) / 4;
    for (int e = 0; e < 16; e++)
        for (int d = 0; d < dquads * 4; d++) {
            int8_t v = rows[e] && d < di ? rows[e][d] : 0;
            tile[(d / 4) * 64 + e * 4 + d % 4] = (uint8_t)(v ^ 0x80);
        }
}

static void pack_bf16__scalar(const uint16_t *const *rows, int di, void *tilev)
{
    uint16_t *tile = tilev;
    int dpairs = (di + 1) / 2;
    for (int e = 0; e < 16; e++)
        for (int d = 0; d < dpairs * 2; d++)
            tile[(d / 2) * 32 + e * 2 + d % 2] = rows[e] && d < di ? rows[e][d] : 0;
}

static void score_int8__scalar(const void *qv, size_t q_stride, const int32_t *qsum128, const float *ws, int nh,
                               const void *tilesv, int ntiles, int di, const float *kscale, float *I)
{
    const int8_t *q = qv;
    const uint8_t *tiles = tilesv;
    int dquads = (di + 3) / 4;
    for (int tile = 0; tile < ntiles; tile++) {
        const uint8_t *tb = tiles + (size_t)tile * dquads * 64; /* [dquads][16][4] */
        float sum[16] = {0};
        for (int h = 0; h < nh; h++) {
            const int8_t *qh = q + (size_t)h * q_stride;
            for (int e = 0; e < 16; e++) {
                uint32_t acc = 0; /* wraps like the int32 SIMD accumulators; exact after the correction */
                for (int k = 0; k < dquads; k++)
                    for (int b = 0; b < 4; b++)
                        acc += (uint32_t)((int32_t)tb[k * 64 + e * 4 + b] * (int32_t)qh[4 * k + b]);
                int32_t dot = (int32_t)(acc - (uint32_t)qsum128[h]);
                float d = dsops_fp16_value(dsops_fp16_round_bits((float)(dot > 0 ? dot : 0) * 0x1p-11f));
                sum[e] += ws[h] * d;
            }
        }
        for (int e = 0; e < 16; e++)
            I[tile * 16 + e] = sum[e] * kscale[tile * 16 + e];
    }
}

static void score_bf16__scalar(const void *qv, size_t q_stride, const float *w, int nh, const void *tilesv,
                               int ntiles, int di, float *I)
{
    const uint16_t *tiles = tilesv;
    int dpairs = (di + 1) / 2;
    for (int tile = 0; tile < ntiles; tile++) {
        const uint16_t *tb = tiles + (size_t)tile * dpairs * 32; /* [dpairs][16][2] */
        float sum[16] = {0};
        for (int h = 0; h < nh; h++) {
            const uint16_t *qh = (const uint16_t *)((const char *)qv + (size_t)h * q_stride);
            for (int e = 0; e < 16; e++) {
                float dot = 0.0f;
                for (int k = 0; k < dpairs; k++) {
                    dot += dsops_bf16_value(qh[2 * k]) * dsops_bf16_value(tb[k * 32 + e * 2]);
                    dot += dsops_bf16_value(qh[2 * k + 1]) * dsops_bf16_value(tb[k * 32 + e * 2 + 1]);
                }
                sum[e] += (dot < 0.0f ? 0.0f : dot) * w[h]; /* max(dot, 0) keeps a NaN dot (spec §3.6) */
            }
        }
        memcpy(I + (size_t)tile * 16, sum, sizeof sum);
    }
}

const dsops_indexer_kernels dsops_indexer_kernels__scalar = {
    .layout_int8 = dsops_indexer_layout_int8_quads,
    .layout_bf16 = dsops_indexer_layout_bf16_pairs,
    .pack_query_int8 = dsops_indexer_pack_query_int8_quads,
    .pack_query_bf16 = dsops_indexer_pack_query_bf16_pairs,
    .pack_int8 = pack_int8__scalar,
    .pack_bf16 = pack_bf16__scalar,
    .score_int8 = score_int8__scalar,
    .score_bf16 = score_bf16__scalar,
};
