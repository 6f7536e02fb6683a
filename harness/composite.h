/* The baselines the benchmark sets beside sparse_flash_attention_v32 and lightning_indexer: what a user without
 * dsops would write in C (gather + dequantise + oneDNN fp32 GEMMs, a softmax or the index-score reduction
 * between, a selection for the top-k), on the same problem and threads. */
#ifndef DSOPS_BENCH_COMPOSITE_H
#define DSOPS_BENCH_COMPOSITE_H

#include "cases.h"

typedef struct dsops_sfa_composite dsops_sfa_composite;

/* A composite over problem p (split_bf16 or split_int8 caches; NULL for packed_int8 or out of memory). It
 * keeps pointers into p and writes p's `out`. */
dsops_sfa_composite *dsops_sfa_composite_make(const dsops_sfa_problem *p);
void dsops_sfa_composite_free(dsops_sfa_composite *c);
/* Computes out on `threads` threads. */
dsops_status dsops_sfa_composite_run(dsops_sfa_composite *c, int threads);
/* Computes the composite's result without writing and returns its largest absolute difference from p's
 * current out (run the operator first): a check that both compute the same attention. */
float dsops_sfa_composite_max_diff(dsops_sfa_composite *c, int threads);


typedef struct dsops_li_composite dsops_li_composite;

/* A composite over lightning_indexer problem p (either variant, any cmp_ratio; NULL when out of memory). It
 * keeps pointers into p and writes only its own buffers. */
dsops_li_composite *dsops_li_composite_make(const dsops_li_problem *p);
void dsops_li_composite_free(dsops_li_composite *c);
/* Scores every visible key (gather, fp32 GEMM of the queries with the keys, ReLU, weighted head sum) and selects
 * the top-k (a selection, then a sort of the K winners), on `threads` threads. */
dsops_status dsops_li_composite_run(dsops_li_composite *c, int threads);
/* [T, K] the scores the last run selected, per token in decreasing order, -Inf past the visible keys. */
const float *dsops_li_composite_scores(const dsops_li_composite *c);

#endif
