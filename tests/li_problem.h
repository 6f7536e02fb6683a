/* Builder of small adversarial lightning_indexer problems (any shape, block size and cmp_ratio; exact
 * tie patterns, extreme int8 values, fp16 overflow / underflow of the head weights, NaN weights and key
 * scales, NaN-poisoned unused cache rows, garbage in unused block-table entries, strided views, guard
 * zones around the outputs), and compare_topk of spec §1.8 extended for near-ties. */
#ifndef DSOPS_TEST_LI_PROBLEM_H
#define DSOPS_TEST_LI_PROBLEM_H

#include <stdint.h>

#include "dsops.h"

#define LP_MAX_B 16

typedef enum lp_data {
    LP_DATA_RANDOM = 0,  /* int8: q, keys U(-128,127), scales U(0.5,2) / U(0.001,0.1), weights U(-1,1);
                          * bf16: q, keys, weights U(-1,1) */
    LP_DATA_EQUAL = 1,   /* every key row identical: all scores of a token are exactly equal */
    LP_DATA_TIES = 2,    /* keys from five row patterns with small integer values: scores are exact in any
                          * summation order and tie in large groups */
    LP_DATA_EXTREME = 3  /* int8: q and keys only -128 / 127; even heads of every token and every fourth
                          * physical cache row all -128, so that their dot is 16384 DI (with DI >= 8190
                          * the 2^-11 guard no longer keeps d_hj finite) */
} lp_data;

typedef struct lp_spec {
    int B;                       /* sequences (0 allowed) */
    int S[LP_MAX_B];             /* query tokens per sequence (0 allowed) */
    int seqused[LP_MAX_B];       /* seqused_kv (original tokens; 0 allowed) */
    int NI, DI, K, BS;
    int cmp_ratio;               /* 0 means 1 */
    int int8;                    /* 1: int8 variant, 0: bf16 (or fp8) */
    int fp8;                     /* with int8 0: the fp8 variant, the bf16 problem's values rounded to e4m3,
                                  * weights as fp32, key scales fp32 (U(0.5, 2); 1 in the exact modes; NaN where key_nan marks a row and in rows nan_fill leaves unseen) */
    int with_scores;             /* topk_scores requested */
    lp_data data;
    int ws_extreme;              /* int8: per token, one head whose fp16(q_scale * weight) overflows to +Inf
                                  * (tokens t % 3 == 0) or -Inf (t % 3 == 1); t % 3 == 2: heads whose
                                  * product underflows to 0 or to an fp16 subnormal */
    int neg_weights;             /* every weight negative: every score <= 0 (many exact -0 / +0 ties) */
    int neg_scales;              /* int8: every third key scale negative */
    int nan_weights;             /* one NaN weight in every fourth token: the whole row is NaN */
    int nan_key_scales;          /* int8: every seventh key scale NaN */
    int nan_fill;                /* cache rows no token can see hold NaN (bf16) / -128 with NaN scales */
    int q_nonfinite;             /* head NI/2 of token t: t % 4 == 1 a NaN query element (bf16) or query scale
                                  * (int8): every score NaN; t % 4 == 2 +Inf there with weight 1, t % 4 == 3
                                  * +Inf with weight -1: scores +Inf / -Inf, NaN or finite by key */
    int key_nan;                 /* every fifth cache row: a NaN element (bf16) or key scale (int8) */
    int strided_q;               /* q_idx, q_idx_scale, weights: padded views */
    int strided_kv;              /* key_cache, key_scale_cache: padded views */
    int strided_out;             /* topk_indices, topk_scores: padded rows */
    int extra_blocks;            /* physical blocks no table entry refers to */
    int extra_cols;              /* block-table columns beyond the needed ones */
    int garbage_table;           /* unused table entries hold garbage (99999, INT32_MIN, NB, ...) */
    int dead_seq_garbage;        /* sequences with no token in the call: whole table row garbage */
} lp_spec;

typedef struct lp_problem {
    lp_spec sp;
    int64_t T, NB, MB;
    dsops_lightning_indexer_args args;  /* the library's arguments */
    int strict;                  /* scores are exact in any summation order: rows must match exactly */
    /* owned buffers */
    void *qbuf, *qsbuf, *wbuf, *kbuf, *ksbuf;
    int32_t *table, *cu, *used;
    int32_t *idx_buf;            /* topk_indices view lives inside, with guard zones */
    float *score_buf;
    int64_t idx_buf_n, score_buf_n;
    int32_t *ref_idx;            /* [T, K] reference indices */
    float *ref_scores;           /* [T, K] reference scores (always computed) */
} lp_problem;

#define LP_SENTINEL_I32 ((int32_t)0x5a5a5a5a)
#define LP_SENTINEL_F32_BITS 0xdeadbeefu

/* The life cycle of sfa_problem.h for this operator's types (the programs name the calls per operator). */

/* Builds a problem (aborts if memory runs out). The reference is not computed yet. */
lp_problem *lp_make(const lp_spec *sp, uint64_t seed);
void lp_free(lp_problem *p);
/* Fills the whole output buffers (guards and padding included) with the sentinels. */
void lp_reset_outputs(lp_problem *p);
/* 1 if no byte of the output buffers differs from the sentinels. */
int lp_outputs_untouched(const lp_problem *p);
/* Runs the oracle into ref_idx / ref_scores. */
void lp_compute_ref(lp_problem *p);
/* Compares the library's outputs with the reference (lp_compare with max_miss 0, strict when the
 * problem's scores are exact) and checks that no element outside the output views was written. */
int lp_check(lp_problem *p, const char *label);

/* Runs the oracle on `a` with its outputs redirected to fresh dense buffers (caller frees);
 * ref_scores is always produced. */
void lp_reference_of(const dsops_lightning_indexer_args *a, int32_t **ref_idx, float **ref_scores);

/* compare_topk (spec §1.8) of the outputs held in a->topk_indices / a->topk_scores against dense
 * reference rows, per token:
 *   - the number of leading valid entries (!= -1) is equal and everything after them is -1 (scores
 *     -Inf); valid library indices are distinct and below the token's visible key count n;
 *   - an index of the library row absent from the reference row is a miss unless its reference score
 *     is a near-tie of the reference K-th score (|diff| <= 1e-4 max|I| over the finite scores of the
 *     row; NaN and NaN, or equal infinities, tie); more than max_miss misses fail the row;
 *   - consecutive library entries follow the §2.9 order of the reference scores, up to near-ties, and
 *     of the library's own scores exactly (when given);
 *   - topk_scores: compare_close 1e-4 / 1e-4 / 0.005 over the entries whose index both rows hold.
 * strict: rows must equal the reference exactly (indices, and scores by value with NaN == NaN).
 * Counts checks; returns 1 on pass. */
int lp_compare(const char *label, const dsops_lightning_indexer_args *a, const int32_t *ref_idx,
               const float *ref_scores, int max_miss, int strict);

/* Writes garbage (0x7f7f7f7f / NaN) into every element of the output views, so that an element the
 * library forgets to write cannot keep an earlier run's value. */
void lp_poison_outputs(const dsops_lightning_indexer_args *a);
/* Copies the outputs into dense arrays of bits (scores only when present and scores != NULL). */
void lp_extract(const dsops_lightning_indexer_args *a, int32_t *idx, uint32_t *scores);

/* Visible keys n_t of token t (spec §3.6). */
int64_t lp_visible(const dsops_lightning_indexer_args *a, int64_t t);

#endif
