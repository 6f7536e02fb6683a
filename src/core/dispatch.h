/* Kernel tables, one per instruction-set tier. Each tier's kernel file exports its kernels as const data
 * (dsops_<family>_kernels__<tier>, NULL where it has none). dispatch.c, built without ISA flags, makes the
 * table of tier k from the table of tier k-1 and the non-NULL entries of tier k, and only for the tiers the
 * CPU and OS support: no code of a tier runs, not even to copy a pointer, before detection allows it. */
#ifndef DSOPS_DISPATCH_H
#define DSOPS_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"

/* Each family's contract (its kernel table, layouts and work sizes) sits beside its kernels. */
#include "../kernels/attention/attention.h"
#include "../kernels/indexer/indexer.h"
#include "../kernels/linear/linear.h"
#include "../kernels/hc/hc.h"
#include "../kernels/compressor/compressor.h"
#include "../kernels/peak/peak.h"

typedef struct dsops_kernel_table {
    dsops_isa isa;
    dsops_attention_kernels attn;
    dsops_indexer_kernels indexer;
    dsops_linear_kernels linear;
    dsops_hc_kernels hc;
    dsops_compressor_kernels compressor;
    dsops_peak_kernels peak;
} dsops_kernel_table;

/* The table of `isa` (capped to the detected tier). */
const dsops_kernel_table *dsops_kernel_table_get(dsops_isa isa);

/* Each tier's own kernels, defined in src/kernels/<family>/<family>-<tier>.c (scalar: every entry). */
extern const dsops_attention_kernels dsops_attention_kernels__scalar;
extern const dsops_indexer_kernels dsops_indexer_kernels__scalar;
extern const dsops_linear_kernels dsops_linear_kernels__scalar;
extern const dsops_hc_kernels dsops_hc_kernels__scalar;
extern const dsops_compressor_kernels dsops_compressor_kernels__scalar;
extern const dsops_peak_kernels dsops_peak_kernels__scalar;
extern const dsops_attention_kernels dsops_attention_kernels__avx2;
extern const dsops_indexer_kernels dsops_indexer_kernels__avx2;
extern const dsops_linear_kernels dsops_linear_kernels__avx2;
extern const dsops_hc_kernels dsops_hc_kernels__avx2;
extern const dsops_compressor_kernels dsops_compressor_kernels__avx2;
extern const dsops_peak_kernels dsops_peak_kernels__avx2;
extern const dsops_attention_kernels dsops_attention_kernels__avx512bf16;
extern const dsops_indexer_kernels dsops_indexer_kernels__avx512bf16;
extern const dsops_linear_kernels dsops_linear_kernels__avx512bf16;
extern const dsops_hc_kernels dsops_hc_kernels__avx512bf16;
extern const dsops_compressor_kernels dsops_compressor_kernels__avx512bf16;
extern const dsops_peak_kernels dsops_peak_kernels__avx512bf16;

#endif
