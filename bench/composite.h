/* The baseline the benchmark sets beside sparse_flash_attention_v32: gather + dequantise + fp32 GEMMs with a
 * softmax between (what a user without dsops would write), on the same problem and threads. */
#ifndef DSOPS_BENCH_COMPOSITE_H
#define DSOPS_BENCH_COMPOSITE_H

#include "cases.h"

typedef struct dsops_sfa_composite dsops_sfa_composite;

/* A composite over problem p (split_bf16 or split_int8 caches; NULL for packed656 or out of memory). It
 * keeps pointers into p and writes p's `out`. */
dsops_sfa_composite *dsops_sfa_composite_make(const dsops_sfa_problem *p);
void dsops_sfa_composite_free(dsops_sfa_composite *c);
/* Computes out on `threads` threads. */
dsops_status dsops_sfa_composite_run(dsops_sfa_composite *c, int threads);
/* Computes the composite's result without writing and returns its largest absolute difference from p's
 * current out (run the operator first): a check that both compute the same attention. */
float dsops_sfa_composite_max_diff(dsops_sfa_composite *c, int threads);

#endif
