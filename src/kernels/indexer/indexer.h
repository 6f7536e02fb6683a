/* The lightning-indexer family: its kernel table (the contract every tier implements in
 * src/kernels/indexer/indexer-<tier>.c, aggregated by src/core/dispatch.h) and the layout entries that
 * tiers share. */
#ifndef DSOPS_KERNELS_INDEXER_H
#define DSOPS_KERNELS_INDEXER_H

#include <stddef.h>
#include <stdint.h>

/* Lightning-indexer layouts: keys as lanes, 16 keys per tile; the layouts belong to the tier, which
 * says their sizes through `layout_int8` / `layout_bf16` and packs both the keys and the queries.
 * A tier sets all entries of a variant (layout, query and key packing, scores) or none of them.
 *  scalar, avx512bf16 (docs/FORMATS.md):
 *    int8 tile:  [dquads][16][4] uint8, key byte d of key e at [(d/4)*64 + e*4 + d%4], stored as k + 128
 *                (the u8 operand of vpdpbusd); padding keys and bytes hold 128 (i.e. key value 0).
 *                Query: 4*dquads int8, zero padded; bias correction 128 * sum_d q[d].
 *    bf16 tile:  [dpairs][16][2] bf16, the attention core's Kt layout; padding is zero.
 *                Query: 2*dpairs bf16, zero padded.
 *  avx2 (also used by avx512):
 *    int8 tile:  [dpairs][16][2] int16, keys sign-extended (operands of vpmaddwd); query [dpairs][2]
 *                int16; no bias (correction 0).
 *    bf16 tile:  [2*dpairs][16] fp32, keys widened; query 2*dpairs fp32. Padding is zero. */
typedef struct dsops_indexer_kernels {
    /* Bytes of one 16-key tile and of one packed query row (a multiple of 64) for keys of di values, and
     * the number of tiles (1 ... 8) the operator packs before it scores them. */
    void (*layout_int8)(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles);
    void (*layout_bf16)(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles);
    /* Packs one query row of di values into query_bytes bytes at dst; the int8 form returns the value
     * that score_int8 subtracts from every dot product of that head (the key bias times sum q). */
    int32_t (*pack_query_int8)(const int8_t *src, int di, void *dst);
    void (*pack_query_bf16)(const uint16_t *src, int di, void *dst);
    /* Packs 16 key rows (rows[e] = di values, or NULL for a padding key) into one tile. */
    void (*pack_int8)(const int8_t *const *rows, int di, void *tile);
    void (*pack_bf16)(const uint16_t *const *rows, int di, void *tile);
    /* int8 scores of 16*ntiles keys (spec §3.6):
     *   I[j] = (sum_h ws[h] * fp16(f32(max(dot_hj, 0)) * 2^-11)) * kscale[j]
     * q: nh packed query rows, row h at (const char *)q + h * q_stride; qbias[h] from pack_query_int8;
     * ws: [nh] fp32 (fp16 values); kscale: [16*ntiles] fp32; I: [16*ntiles] fp32. */
    void (*score_int8)(const void *q, size_t q_stride, const int32_t *qbias, const float *ws, int nh,
                       const void *tiles, int ntiles, int di, const float *kscale, float *I);
    /* bf16 scores: I[j] = sum_h max(dot(q[h], key_j), 0) * w[h]; q as for score_int8. */
    void (*score_bf16)(const void *q, size_t q_stride, const float *w, int nh, const void *tiles, int ntiles,
                       int di, float *I);
} dsops_indexer_kernels;

/* Lightning-indexer family: the layout entries of the quad / pair layouts (above), defined
 * in indexer-scalar.c and shared by the tiers that score on them (scalar, avx512bf16). */
void dsops_indexer_layout_int8_quads(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles);
void dsops_indexer_layout_bf16_pairs(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles);
/* q + zero padding to 4*dquads bytes; returns 128 * sum q (the k + 128 bias), wrapping like int32. */
int32_t dsops_indexer_pack_query_int8_quads(const int8_t *src, int di, void *dst);
void dsops_indexer_pack_query_bf16_pairs(const uint16_t *src, int di, void *dst);

#endif
