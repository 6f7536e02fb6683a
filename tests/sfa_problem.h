/* Builder of sparse_flash_attention_v32 test problems: small, adversarial, any shape and layout, with
 * optional strided views, NaN-poisoned unused cache rows, invalid-index zoos and guard zones around the
 * outputs; plus the comparison of a library result against the reference oracle. */
#ifndef DSOPS_TEST_SFA_PROBLEM_H
#define DSOPS_TEST_SFA_PROBLEM_H

#include <stdint.h>

#include "dsops.h"

#define TP_MAX_B 16

typedef enum tp_index_mode {
    TP_IDX_VALID = 0,    /* random valid positions, with duplicates */
    TP_IDX_ZOO = 1,      /* half valid, half from {-1, -5, INT32_MIN, INT32_MAX, seqused, seqused+7} */
    TP_IDX_INVALID = 2,  /* only the invalid values above */
    TP_IDX_CASE = 3      /* docs/CASES.md rows: 0..seqused-1 then zeros, or the first K of a permutation */
} tp_index_mode;

typedef struct tp_spec {
    int B;                        /* sequences (0 allowed) */
    int S[TP_MAX_B];              /* query tokens per sequence (0 allowed) */
    int seqused[TP_MAX_B];        /* seqused_kv per sequence (0 allowed) */
    int N, Dc, Dr, K, BS;
    dsops_kv_layout layout;
    dsops_p_mode p_mode;
    int p_tile;                   /* tiled mode; 0 means 128 */
    float softmax_scale;          /* 0 means (Dc + Dr)^-0.5 */
    int with_lse;
    int with_topk_length;         /* random lengths: 0, in [0, K], K + 3, INT32_MAX */
    int with_sinks;               /* sinks [N] in [-3, 3]; 2: heads 0, 1, 2 (of those there are) +Inf, -Inf, NaN */
    tp_index_mode index_mode;
    int nan_fill;                 /* every cache row no token uses holds NaN (int8: -1 with NaN scales) */
    int inf_fill;                 /* every cache row no token uses holds +Inf (int8: 1 with +Inf scales) */
    float q_amp;                  /* q ~ U(-q_amp, q_amp); 0 means 1 */
    int int8_extreme;             /* int8 latents only -128 / 127 */
    int strided_q;                /* q_nope / q_rope: views into one [T, N, Dc+Dr+pad] buffer */
    int strided_kv;               /* 1: cache views into one padded buffer; 2 (split_int8, Dc 512, Dr 64):
                                   * views into a packed_int8-compatible buffer, no padding */
    int strided_out;              /* out / lse: padded views (the padding must stay untouched) */
    int extra_blocks;             /* physical blocks no table entry refers to */
    int extra_cols;               /* block-table columns beyond the needed ones */
    int garbage_table;            /* unused table entries hold garbage (99999, INT32_MIN, ...) instead of -1 */
    int neg_inf;                  /* split_bf16: some keys (and all keys of sequence 0) score -Inf */
} tp_spec;

typedef struct tp_problem {
    tp_spec sp;
    int64_t T, NB, MB;
    dsops_sparse_flash_attention_v32_args args;  /* the library's arguments */
    /* owned buffers */
    void *qbuf[2];
    void *kvbuf[4];
    int32_t *idx, *len, *table, *cu, *used;
    float *sinks;
    uint16_t *out_buf;            /* out view lives inside, with guard zones around it */
    float *lse_buf;
    int64_t out_buf_n, lse_buf_n; /* elements of the whole buffers */
    uint16_t *ref_out;            /* [T, N, Dc] reference output */
    float *ref_lse;               /* [T, N] reference lse (always computed) */
} tp_problem;

#define TP_SENTINEL_BF16 ((uint16_t)0xdead)
#define TP_SENTINEL_F32_BITS 0xdeadbeefu

/* Builds a problem from the spec with the given seed (NULL if memory runs out). The reference is not
 * computed yet. */
tp_problem *tp_make(const tp_spec *sp, uint64_t seed);
void tp_free(tp_problem *p);
/* Fills the whole out / lse buffers (guards and padding included) with the sentinels. */
void tp_reset_outputs(tp_problem *p);
/* 1 if no byte of the out / lse buffers differs from the sentinels. */
int tp_outputs_untouched(const tp_problem *p);
/* Runs the oracle into ref_out / ref_lse. */
void tp_compute_ref(tp_problem *p);
/* Compares the library's outputs in p->args with the reference, checks exact lonely rows and that every
 * element of the out / lse buffers outside the views still holds the sentinel. Counts checks. */
int tp_check(tp_problem *p, const char *label);

/* Compares the outputs held in a->out / a->lse with dense reference outputs (out [T, N, Dc] bf16 bits,
 * lse [T, N]): compare_close with the tolerances of spec §4.4 (tiled mode: atol 5e-4), lonely rows
 * (ref lse = +Inf) exactly +0 / +Inf, poisoned rows (ref lse NaN) NaN in every element and in lse, and no
 * NaN in a row whose reference has none. Counts checks. */
int tp_compare(const char *label, const dsops_sparse_flash_attention_v32_args *a, const uint16_t *ref_out,
               const float *ref_lse);

/* Runs the oracle on `a` with its outputs redirected to freshly allocated dense buffers (returned;
 * caller frees). ref_lse is always produced. */
void tp_reference_of(const dsops_sparse_flash_attention_v32_args *a, uint16_t **ref_out, float **ref_lse);

/* Element c of the query of token t, head h (c < Dc: q_nope, else q_rope[c - Dc]) becomes bf16(v). */
void tp_set_q(tp_problem *p, int64_t t, int64_t h, int64_t c, float v);
/* Rope element c of the cached key at logical position idx of sequence b becomes bf16(v) (every layout). */
void tp_set_key_rope(tp_problem *p, int64_t b, int64_t idx, int64_t c, float v);
/* The used entries of token t's top-k row (spec §4.4 steps 1-2): their count, the first one's position
 * in *first (-1 when there is none). */
int64_t tp_used_entries(const tp_problem *p, int64_t t, int64_t *first);

/* Writes a NaN pattern into every element of the out view and the lse view (if present), so that an
 * element the library forgets to write cannot keep an earlier run's value. */
void tp_poison_outputs(const dsops_sparse_flash_attention_v32_args *a);

/* Copies out (and lse, if present) into dense arrays of bits, for bitwise comparisons. */
void tp_extract(const dsops_sparse_flash_attention_v32_args *a, uint16_t *out_bits, uint32_t *lse_bits);

#endif
