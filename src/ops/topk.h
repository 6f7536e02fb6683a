/* Top-k selection of spec §2.9, shared by the indexers. */
#ifndef DSOPS_TOPK_H
#define DSOPS_TOPK_H

#include <stddef.h>
#include <stdint.h>

/* Scratch bytes dsops_topk needs for rows of up to n scores and k outputs. */
size_t dsops_topk_scratch_bytes(int64_t n, int64_t k);

/* Writes the indices of the min(n, k) greatest scores[0..n-1] to idx[0..k-1] in decreasing score order
 * (equal scores by increasing index; NaN below every number; -0 == +0), then -1; and, if out_scores is
 * not NULL, the selected scores, then -Inf. Cost: a few passes over the row plus m log m for the m
 * selected entries (a radix select finds the k-th score first; the row is never sorted). */
void dsops_topk(const float *scores, int64_t n, int64_t k, int32_t *idx, float *out_scores, void *scratch);

#endif
