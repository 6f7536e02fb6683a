/* The hc family's 2-token x 6-mix layout, shared by the scalar and AVX2 tiers (hc-scalar.c defines the
 * layout functions; the AVX2 table names them, so a prepared hc_fn packed on one serves the other).
 *
 * Packed hc_fn: [HC][nc][groups][2][6][8] floats, groups = ceil(M/6), nc = ceil(H/16): chunk c of stream i
 * covers channels 16c .. 16c+15; half 0 holds the even channels (lane l: 16c + 2l), half 1 the odd ones
 * (16c + 2l + 1), which is how a 256-bit load of 16 bf16 splits into two fp32 vectors with one shift and
 * one mask; mix g*6 + j is row j of group g. Zero beyond H and beyond M. */
#ifndef DSOPS_KERNELS_HC_H
#define DSOPS_KERNELS_HC_H

#include <stddef.h>
#include <stdint.h>

#define HC_MIXES 6       /* mixes per register tile (x 2 tokens = 12 accumulators) */
#define HC_LANES 8
#define HC_CHUNK 16      /* channels per chunk: one 256-bit load of bf16 */
#define HC_CHUNK_FLOATS (2 * HC_MIXES * HC_LANES)
/* work floats of one token pair: partial sums of every group, then the sums of squares */
#define HC_PAIR_FLOATS(groups) ((size_t)((groups) * 2 * HC_MIXES + 4) * HC_LANES)

size_t dsops_hc_packed_floats_2x6(int M, int HC, int64_t H);
void dsops_hc_pack_2x6(const float *w, size_t ldw, int M, int HC, int64_t H, float *wp);
size_t dsops_hc_mix_work_floats_2x6(int nt, int M);

#endif
