/* Attention family: the layout entry of the bf16 layouts (src/core/dispatch.h), defined in
 * attention-scalar.c and named by every tier that packs and computes on them (all tiers today). */
#ifndef DSOPS_KERNELS_ATTENTION_H
#define DSOPS_KERNELS_ATTENTION_H

#include <stddef.h>

void dsops_attention_layout_bf16(size_t *kt_elem_bytes, size_t *vp_elem_bytes);

#endif
