/* Sequence descriptors shared by the operators over paged caches (spec §1.4, V6). */
#ifndef DSOPS_SEQUENCES_H
#define DSOPS_SEQUENCES_H

#include <stdint.h>

#include "dsops.h"

/* Shapes and dtypes of cu_seqlens_q [B+1], seqused_kv [B] and block_table [B, MB] (int32); sets B, MB. */
dsops_status dsops_check_sequence_tensors(const dsops_tensor *cu_seqlens_q, const dsops_tensor *seqused_kv,
                                          const dsops_tensor *block_table, int64_t *B, int64_t *MB);
/* V6: cu_seqlens_q starts at 0, never decreases, ends at T; every value of `used` ([B] int32: seqused_kv or
 * start_pos, named used_name in messages) >= 0. */
dsops_status dsops_check_sequence_values(const dsops_tensor *cu_seqlens_q, const dsops_tensor *used,
                                         const char *used_name, int64_t B, int64_t T);
/* A top-k index tensor [T, K] int32 (inner stride free): K >= 1 (ERR_SHAPE) and K <= 2^24 (ERR_UNSUPPORTED). */
dsops_status dsops_check_topk_tensor(const dsops_tensor *t, const char *name, int64_t T, const char *t_from,
                                     int64_t *K);

/* Token t's sequence b, the sequence's token count S and t's index i in it. */
void dsops_token_of(const dsops_tensor *cu_seqlens_q, int64_t B, int64_t t, int64_t *b, int64_t *S, int64_t *i);

static inline int32_t dsops_i32_at(const dsops_tensor *t, int64_t i) { return *(const int32_t *)((const char *)t->data + (size_t)(i * t->stride[0]) * 4); }

#endif
