/* Reference oracles for the dsops operators (spec/OPS.md).
 *
 * They execute the Math steps of the spec literally: every fp32 sum is accumulated in ascending index
 * order, every bf16 rounding point of the spec is applied, nothing is contracted into FMA. They are the
 * truth the library's fast paths are measured against, so they depend only on the public types of
 * dsops.h, never on library internals.
 *
 * The oracles do not validate: they must be given arguments the library accepts. For such arguments
 * they never read outside the extents declared by the tensors. */
#ifndef DSOPS_REF_H
#define DSOPS_REF_H

#include <stdint.h>

#include "dsops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bf16 helpers of spec §2.1 (round to nearest even; NaN becomes a quiet NaN with its sign). */
uint16_t dsops_ref_bf16_from_f32(float f);
float dsops_ref_f32_from_bf16(uint16_t h);

/* sparse_flash_attention_v32 (spec §4.4 with the attention core of §2.10, no sink).
 * Writes a->out and, when present, a->lse. Returns nothing: the arguments must be valid. */
void dsops_ref_sparse_flash_attention_v32(const dsops_sparse_flash_attention_v32_args *a);

/* fp16 helpers of spec §2.1 (round to nearest even, subnormals kept, |f| >= 65520 gives +-Inf; NaN
 * stays a quiet NaN with its sign). */
uint16_t dsops_ref_fp16_from_f32(float f);
float dsops_ref_f32_from_fp16(uint16_t h);

/* lightning_indexer (spec §3.6, §4.3; top-k §2.9). Writes a->topk_indices and, when present,
 * a->topk_scores. The arguments must be valid. */
void dsops_ref_lightning_indexer(const dsops_lightning_indexer_args *a);
/* The full score row I[0 .. n-1] of token t (0 <= t < T) into scores (room for n values, n at most
 * floor(seqused_kv[b] / cmp_ratio)); returns n. */
int64_t dsops_ref_lightning_indexer_scores(const dsops_lightning_indexer_args *a, int64_t t, float *scores);
/* The order of spec §2.9: 1 if (score sa, index ia) comes before (sb, ib) in a top-k row (larger score
 * first, NaN below every number, -0 == +0, equal scores by increasing index). */
int dsops_ref_topk_before(float sa, int64_t ia, float sb, int64_t ib);

#ifdef __cplusplus
}
#endif

#endif
