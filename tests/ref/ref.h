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

#ifdef __cplusplus
}
#endif

#endif
