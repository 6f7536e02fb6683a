/* Validation halves of the operators that the fused layer chains: each checks everything its
 * operator checks before writing (V1), so the fused operator can validate every stage first. */
#ifndef DSOPS_STAGES_H
#define DSOPS_STAGES_H

#include <stdbool.h>

#include "dsops.h"

/* with_indices = false skips the checks that read topk_indices (not yet computed in a fused call). */
dsops_status dsops_sfa_v32_validate(const dsops_sparse_flash_attention_v32_args *a, bool with_indices);
dsops_status dsops_li_validate(const dsops_lightning_indexer_args *a);
/* slot_scratch: dsops_cache_slots_scratch_bytes(T) bytes */
dsops_status dsops_mla_prolog_v32_validate(const dsops_mla_prolog_v32_args *a, void *slot_scratch);
dsops_status dsops_indexer_prolog_v32_validate(const dsops_indexer_prolog_v32_args *a, void *slot_scratch);

#endif
