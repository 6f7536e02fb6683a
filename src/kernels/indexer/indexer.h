/* Lightning-indexer family: the layout entries of the quad / pair layouts (src/core/dispatch.h), defined
 * in indexer-scalar.c and shared by the tiers that score on them (scalar, avx512bf16). */
#ifndef DSOPS_KERNELS_INDEXER_H
#define DSOPS_KERNELS_INDEXER_H

#include <stddef.h>
#include <stdint.h>

void dsops_indexer_layout_int8_quads(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles);
void dsops_indexer_layout_bf16_pairs(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles);
/* q + zero padding to 4*dquads bytes; returns 128 * sum q (the k + 128 bias), wrapping like int32. */
int32_t dsops_indexer_pack_query_int8_quads(const int8_t *src, int di, void *dst);
void dsops_indexer_pack_query_bf16_pairs(const uint16_t *src, int di, void *dst);

#endif
