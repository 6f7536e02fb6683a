/* Argument validation of lightning_indexer (spec §1.6 V1-V10, §3.6 "Validation"):
 * a table of bad argument sets, each with its expected status and a message fragment (field name with
 * its index and the value). After every error topk_indices and topk_scores must be untouched. A second
 * table holds argument sets that look suspicious but are valid (garbage in unneeded table entries,
 * sequences with no token or no visible key); those are compared with the oracle.
 * Usage: test_li_validation [label filter]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problems_check.h"
#include "test_util.h"
#include "validation.h"

static dsops_context *ctx;

/* The base problem: 3 sequences (S 2, 1, 2; seqused 300, 500, 40), NI 2, DI 64, K 8, BS 64, cmp_ratio 1,
 * topk_scores on. Needed block-table columns: sequence 0: 0-4, sequence 1: 0-7, sequence 2: 0; the table
 * has MB = 10 columns and every unneeded entry holds garbage. Tokens: 0, 1 (seq 0), 2 (seq 1), 3, 4
 * (seq 2). */
static lp_problem *base(int int8)
{
    lp_spec s;
    memset(&s, 0, sizeof s);
    s.B = 3;
    s.S[0] = 2, s.S[1] = 1, s.S[2] = 2;
    s.seqused[0] = 300, s.seqused[1] = 500, s.seqused[2] = 40;
    s.NI = 2;
    s.DI = 64;
    s.K = 8;
    s.BS = 64;
    s.cmp_ratio = 1;
    s.int8 = int8;
    s.with_scores = 1;
    s.extra_cols = 2;
    s.garbage_table = 1;
    return lp_make(&s, 1234);
}

/* One mutator per table row, alike in shape on purpose (as in every validation program): each reads as the rule it
 * breaks, next to its table entry's status. */
#define FRAG(...) snprintf(frag, VAL_FRAG_MAX, __VA_ARGS__)
#define A (&p->args)

/* ---- V2 NULL ------------------------------------------------------------------------------------- */
static void null_q(void *problem, char *frag) { lp_problem *p = problem; A->q_idx.data = NULL; FRAG("q_idx is NULL"); }
static void null_qs(void *problem, char *frag) { lp_problem *p = problem; A->q_idx_scale.data = NULL; FRAG("q_idx_scale is NULL"); }
static void null_w(void *problem, char *frag) { lp_problem *p = problem; A->weights.data = NULL; FRAG("weights is NULL"); }
static void null_key(void *problem, char *frag) { lp_problem *p = problem; A->key_cache.data = NULL; FRAG("key_cache is NULL"); }
static void null_ks(void *problem, char *frag) { lp_problem *p = problem; A->key_scale_cache.data = NULL; FRAG("key_scale_cache is NULL"); }
static void null_table(void *problem, char *frag) { lp_problem *p = problem; A->block_table.data = NULL; FRAG("block_table is NULL"); }
static void null_cu(void *problem, char *frag) { lp_problem *p = problem; A->cu_seqlens_q.data = NULL; FRAG("cu_seqlens_q is NULL"); }
static void null_used(void *problem, char *frag) { lp_problem *p = problem; A->seqused_kv.data = NULL; FRAG("seqused_kv is NULL"); }
static void null_topk(void *problem, char *frag) { lp_problem *p = problem; A->topk_indices.data = NULL; FRAG("topk_indices is NULL"); }

/* ---- V3 ranks and extents ------------------------------------------------------------------------------ */
static void rank_q(void *problem, char *frag) { lp_problem *p = problem; A->q_idx.ndim = 2; FRAG("q_idx has rank 2"); }
static void rank_w(void *problem, char *frag) { lp_problem *p = problem; A->weights.ndim = 3; A->weights.shape[2] = 1; A->weights.stride[2] = 1; FRAG("weights has rank 3"); }
static void rank_key(void *problem, char *frag) { lp_problem *p = problem; A->key_cache.ndim = 2; FRAG("key_cache has rank 2"); }
static void rank_ks(void *problem, char *frag) { lp_problem *p = problem; A->key_scale_cache.ndim = 1; FRAG("key_scale_cache has rank 1"); }
static void rank_table(void *problem, char *frag) { lp_problem *p = problem; A->block_table.ndim = 1; FRAG("block_table has rank 1"); }
static void rank_topk(void *problem, char *frag) { lp_problem *p = problem; A->topk_indices.ndim = 1; FRAG("topk_indices has rank 1"); }
static void rank_scores(void *problem, char *frag) { lp_problem *p = problem; A->topk_scores.ndim = 3; A->topk_scores.shape[2] = 1; A->topk_scores.stride[2] = 1; FRAG("topk_scores has rank 3"); }
static void shape_w_ni(void *problem, char *frag) { lp_problem *p = problem; A->weights.shape[1] = 1; FRAG("weights.shape[1] = 1"); }
static void shape_w_t(void *problem, char *frag) { lp_problem *p = problem; A->weights.shape[0] = 4; FRAG("weights.shape[0] = 4"); }
static void shape_qs_ni(void *problem, char *frag) { lp_problem *p = problem; A->q_idx_scale.shape[1] = 1; FRAG("q_idx_scale.shape[1] = 1"); }
static void shape_qs_t(void *problem, char *frag) { lp_problem *p = problem; A->q_idx_scale.shape[0] = 3; FRAG("q_idx_scale.shape[0] = 3"); }
static void shape_key_di(void *problem, char *frag) { lp_problem *p = problem; A->key_cache.shape[2] = 32; FRAG("key_cache.shape[2] = 32"); }
static void shape_ks_bs(void *problem, char *frag) { lp_problem *p = problem; A->key_scale_cache.shape[1] = 63; FRAG("key_scale_cache.shape[1] = 63"); }
static void shape_ks_nb(void *problem, char *frag)
{
    lp_problem *p = problem;
    A->key_scale_cache.shape[0] -= 1;
    FRAG("key_scale_cache.shape[0] = %lld", (long long)A->key_scale_cache.shape[0]);
}
static void shape_used(void *problem, char *frag) { lp_problem *p = problem; A->seqused_kv.shape[0] = 2; FRAG("seqused_kv.shape[0] = 2"); }
static void shape_table_b(void *problem, char *frag) { lp_problem *p = problem; A->block_table.shape[0] = 2; FRAG("block_table.shape[0] = 2"); }
static void shape_topk_t(void *problem, char *frag) { lp_problem *p = problem; A->topk_indices.shape[0] = 4; FRAG("topk_indices.shape[0] = 4"); }
static void shape_scores_k(void *problem, char *frag) { lp_problem *p = problem; A->topk_scores.shape[1] = 7; FRAG("topk_scores.shape[1] = 7"); }
static void shape_scores_t(void *problem, char *frag) { lp_problem *p = problem; A->topk_scores.shape[0] = 4; FRAG("topk_scores.shape[0] = 4"); }
static void shape_k0(void *problem, char *frag)
{
    lp_problem *p = problem;
    A->topk_indices.shape[1] = 0;
    A->topk_scores.shape[1] = 0;
    FRAG("topk_indices.shape[1] = 0");
}
static void shape_ni0(void *problem, char *frag)
{
    lp_problem *p = problem;
    A->q_idx.shape[1] = 0;
    A->weights.shape[1] = 0;
    if (A->q_idx_scale.data)
        A->q_idx_scale.shape[1] = 0;
    FRAG("q_idx");
}
static void shape_di0(void *problem, char *frag)
{
    lp_problem *p = problem;
    A->q_idx.shape[2] = 0;
    A->key_cache.shape[2] = 0;
    FRAG("q_idx");
}
/* DI beyond the int8 limit: the extents are not backed by memory, so nothing may be read */
static void shape_di_big(void *problem, char *frag)
{
    lp_problem *p = problem;
    A->q_idx.shape[2] = 131073;
    A->key_cache.shape[2] = 131073;
    FRAG("q_idx.shape[2] = 131073");
}
static void shape_cu_empty(void *problem, char *frag) { lp_problem *p = problem; A->cu_seqlens_q.shape[0] = 0; FRAG("cu_seqlens_q.shape[0] = 0"); }

/* ---- V4 dtypes ------------------------------------------------------------------------------------ */
static void dt_key_bf16(void *problem, char *frag) { lp_problem *p = problem; A->key_cache.dtype = DSOPS_BF16; FRAG("key_cache has dtype bf16"); }
static void dt_key_int8(void *problem, char *frag) { lp_problem *p = problem; A->key_cache.dtype = DSOPS_INT8; FRAG("key_cache has dtype int8"); }
static void dt_q_fp16(void *problem, char *frag) { lp_problem *p = problem; A->q_idx.dtype = DSOPS_FP16; FRAG("q_idx has dtype fp16"); }
static void dt_w_bf16(void *problem, char *frag) { lp_problem *p = problem; A->weights.dtype = DSOPS_BF16; FRAG("weights has dtype bf16"); }
static void dt_w_fp16(void *problem, char *frag) { lp_problem *p = problem; A->weights.dtype = DSOPS_FP16; FRAG("weights has dtype fp16"); }
static void dt_w_fp32(void *problem, char *frag) { lp_problem *p = problem; A->weights.dtype = DSOPS_FP32; FRAG("weights has dtype fp32"); }
static void dt_qs(void *problem, char *frag) { lp_problem *p = problem; A->q_idx_scale.dtype = DSOPS_FP32; FRAG("q_idx_scale has dtype fp32"); }
static void dt_ks(void *problem, char *frag) { lp_problem *p = problem; A->key_scale_cache.dtype = DSOPS_BF16; FRAG("key_scale_cache has dtype bf16"); }
static void dt_table(void *problem, char *frag) { lp_problem *p = problem; A->block_table.dtype = DSOPS_INT64; FRAG("block_table has dtype int64"); }
static void dt_cu(void *problem, char *frag) { lp_problem *p = problem; A->cu_seqlens_q.dtype = DSOPS_INT64; FRAG("cu_seqlens_q has dtype int64"); }
static void dt_used(void *problem, char *frag) { lp_problem *p = problem; A->seqused_kv.dtype = DSOPS_UINT8; FRAG("seqused_kv has dtype uint8"); }
static void dt_topk(void *problem, char *frag) { lp_problem *p = problem; A->topk_indices.dtype = DSOPS_INT64; FRAG("topk_indices has dtype int64"); }
static void dt_scores(void *problem, char *frag) { lp_problem *p = problem; A->topk_scores.dtype = DSOPS_BF16; FRAG("topk_scores has dtype bf16"); }

/* ---- V5 parameters and variant mix-ups ----------------------------------------------------------------- */
/* scales given to the bf16 variant: borrow valid fp16 views of the right shapes */
static uint16_t scale_mem[64 * 1024];
static void bf16_with_qs(void *problem, char *frag)
{
    lp_problem *p = problem;
    int64_t s2[2] = {p->T, p->sp.NI};
    A->q_idx_scale = dsops_tensor_make(scale_mem, DSOPS_FP16, 2, s2);
    FRAG("q_idx_scale");
}
static void bf16_with_ks(void *problem, char *frag)
{
    lp_problem *p = problem;
    int64_t s2[2] = {p->NB, p->sp.BS};
    A->key_scale_cache = dsops_tensor_make(scale_mem, DSOPS_FP16, 2, s2);
    FRAG("key_scale_cache");
}
/* the fp8 variant's mix-ups, on the bf16 problem relabelled (every row fails before any element is read):
 * q_idx and key_cache e4m3, weights fp32 and key scales fp32 borrowed from static memory */
static float f32_mem[64 * 1024];
static void to_fp8(lp_problem *p, int keys, int weights, int key_scales)
{
    A->q_idx.dtype = DSOPS_FP8_E4M3;
    if (keys)
        A->key_cache.dtype = DSOPS_FP8_E4M3;
    if (weights)
        A->weights = dsops_tensor_make(f32_mem, DSOPS_FP32, 2, (int64_t[]){p->T, p->sp.NI});
    if (key_scales)
        A->key_scale_cache = dsops_tensor_make(f32_mem + 1024, DSOPS_FP32, 2, (int64_t[]){p->NB, p->sp.BS});
}
static void fp8_w_bf16(void *problem, char *frag) { lp_problem *p = problem; to_fp8(p, 1, 0, 1); FRAG("weights has dtype bf16, expected fp32"); }
static void fp8_key_bf16(void *problem, char *frag) { lp_problem *p = problem; to_fp8(p, 0, 1, 1); FRAG("key_cache has dtype bf16, expected fp8_e4m3"); }
static void fp8_no_ks(void *problem, char *frag) { lp_problem *p = problem; to_fp8(p, 1, 1, 0); FRAG("key_scale_cache is NULL"); }
static void fp8_ks_fp16(void *problem, char *frag)
{
    lp_problem *p = problem;
    to_fp8(p, 1, 1, 0);
    A->key_scale_cache = dsops_tensor_make(scale_mem, DSOPS_FP16, 2, (int64_t[]){p->NB, p->sp.BS});
    FRAG("key_scale_cache has dtype fp16, expected fp32");
}
static void fp8_with_qs(void *problem, char *frag)
{
    lp_problem *p = problem;
    to_fp8(p, 1, 1, 1);
    A->q_idx_scale = dsops_tensor_make(scale_mem, DSOPS_FP16, 2, (int64_t[]){p->T, p->sp.NI});
    FRAG("q_idx_scale is given but q_idx is fp8_e4m3");
}
static void fp8_ks_shape(void *problem, char *frag)
{
    lp_problem *p = problem;
    to_fp8(p, 1, 1, 1);
    A->key_scale_cache.shape[1] = 63;
    FRAG("key_scale_cache.shape[1] = 63");
}
/* the optional logits [T, LMAX]: sequence 1 (500 tokens) sees 500 keys */
static void with_logits(lp_problem *p, int64_t lmax) { A->logits = dsops_tensor_make(f32_mem + 4096, DSOPS_FP32, 2, (int64_t[]){p->T, lmax}); }
static void logits_narrow(void *problem, char *frag) { lp_problem *p = problem; with_logits(p, 499); FRAG("logits has 499 columns, but the last token of sequence 1 sees 500 keys"); }
static void logits_dtype(void *problem, char *frag) { lp_problem *p = problem; with_logits(p, 512); A->logits.dtype = DSOPS_BF16; FRAG("logits has dtype bf16"); }
static void logits_rank(void *problem, char *frag) { lp_problem *p = problem; with_logits(p, 512); A->logits.ndim = 1; FRAG("logits has rank 1"); }
static void logits_rows(void *problem, char *frag) { lp_problem *p = problem; with_logits(p, 512); A->logits.shape[0] = 4; FRAG("logits.shape[0] = 4"); }
static void logits_alias(void *problem, char *frag) { lp_problem *p = problem; with_logits(p, 512); A->logits.data = A->topk_scores.data; FRAG("overlaps"); }
static void logits_alias_key(void *problem, char *frag) { lp_problem *p = problem; with_logits(p, 512); A->logits.data = A->key_cache.data; FRAG("overlaps"); }
static void ratio_zero(void *problem, char *frag) { lp_problem *p = problem; A->cmp_ratio = 0; FRAG("cmp_ratio = 0"); }
static void ratio_negative(void *problem, char *frag) { lp_problem *p = problem; A->cmp_ratio = -4; FRAG("cmp_ratio = -4"); }

/* ---- V6 sequences ----------------------------------------------------------------------------------- */
static void cu_first(void *problem, char *frag) { lp_problem *p = problem; p->cu[0] = 1; FRAG("cu_seqlens_q[0] = 1"); }
static void cu_decreasing(void *problem, char *frag) { lp_problem *p = problem; p->cu[2] = 1; FRAG("cu_seqlens_q[2] = 1"); } /* 0, 2, 1, 5 */
static void cu_last_below(void *problem, char *frag) { lp_problem *p = problem; p->cu[3] = 4; FRAG("cu_seqlens_q[3] = 4"); }
static void cu_last_above(void *problem, char *frag) { lp_problem *p = problem; p->cu[3] = 6; FRAG("cu_seqlens_q[3] = 6"); }
static void cu_middle_above(void *problem, char *frag) { lp_problem *p = problem; p->cu[1] = 9; FRAG("cu_seqlens_q[2] = 3"); } /* 0, 9, 3, 5 */
static void used_negative(void *problem, char *frag) { lp_problem *p = problem; p->used[2] = -1; FRAG("seqused_kv[2] = -1"); }
static void used_min(void *problem, char *frag) { lp_problem *p = problem; p->used[0] = INT32_MIN; FRAG("seqused_kv[0] = %d", INT32_MIN); }

/* ---- V7 paged access -------------------------------------------------------------------------------- */
static void table_big(void *problem, char *frag) { lp_problem *p = problem; p->table[1 * p->MB + 7] = 99; FRAG("block_table[1][7] = 99"); }
static void table_neg(void *problem, char *frag) { lp_problem *p = problem; p->table[0 * p->MB + 4] = -1; FRAG("block_table[0][4] = -1"); }
static void table_nb(void *problem, char *frag)
{
    lp_problem *p = problem;
    p->table[2 * p->MB + 0] = (int32_t)p->NB;
    FRAG("block_table[2][0] = %lld", (long long)p->NB);
}
static void table_min(void *problem, char *frag)
{
    lp_problem *p = problem;
    p->table[1 * p->MB + 0] = INT32_MIN;
    FRAG("block_table[1][0] = %d", INT32_MIN);
}
/* sequence 0 needs columns 0-4: a table of 4 columns is too narrow */
static void table_narrow(void *problem, char *frag) { lp_problem *p = problem; A->block_table.shape[1] = 4; FRAG("block_table column"); }
/* a longer sequence than the table covers (every entry of its row valid) */
static void table_used_grows(void *problem, char *frag)
{
    lp_problem *p = problem;
    for (int64_t c = 0; c < p->MB; c++)
        p->table[2 * p->MB + c] = 0;
    p->used[2] = 64 * 10 + 1;
    FRAG("block_table column");
}
/* cmp_ratio 4: sequence 1 (500 tokens) has 125 keys, columns 0-1; column 1 is bad */
static void table_ratio4(void *problem, char *frag)
{
    lp_problem *p = problem;
    A->cmp_ratio = 4;
    p->table[1 * p->MB + 1] = -3;
    FRAG("block_table[1][1] = -3");
}

/* ---- V9 aliasing ------------------------------------------------------------------------------------ */
static void alias_topk_q(void *problem, char *frag) { lp_problem *p = problem; A->topk_indices.data = A->q_idx.data; FRAG("overlaps"); }
static void alias_topk_key(void *problem, char *frag) { lp_problem *p = problem; A->topk_indices.data = A->key_cache.data; FRAG("overlaps"); }
static void alias_topk_w(void *problem, char *frag) { lp_problem *p = problem; A->topk_indices.data = A->weights.data; FRAG("overlaps"); }
static void alias_topk_table(void *problem, char *frag) { lp_problem *p = problem; A->topk_indices.data = A->block_table.data; FRAG("overlaps"); }
static void alias_topk_ks(void *problem, char *frag) { lp_problem *p = problem; A->topk_indices.data = A->key_scale_cache.data; FRAG("overlaps"); }
static void alias_scores_topk(void *problem, char *frag) { lp_problem *p = problem; A->topk_scores.data = A->topk_indices.data; FRAG("overlaps"); }
static void alias_scores_qs(void *problem, char *frag) { lp_problem *p = problem; A->topk_scores.data = A->q_idx_scale.data; FRAG("overlaps"); }
static void alias_scores_used(void *problem, char *frag) { lp_problem *p = problem; A->topk_scores.data = A->seqused_kv.data; FRAG("overlaps"); }
/* topk_scores overlapping only the last row of topk_indices */
static void alias_scores_topk_tail(void *problem, char *frag)
{
    lp_problem *p = problem;
    A->topk_scores.data = (int32_t *)A->topk_indices.data + (p->T - 1) * A->topk_indices.stride[0] + p->sp.K - 1;
    FRAG("overlaps");
}

#define I8 1
#define BF 0

/* The rule table (validation.h): its rows look like every validation program's rows, in shape only; each is
 * one rule of this operator's fields. */
/* variant: int8 (1) or bf16 (0) */
static const val_bad_case bad_cases[] = {
    {"null_q_idx", I8, DSOPS_ERR_NULL, null_q},
    {"null_q_idx_bf16", BF, DSOPS_ERR_NULL, null_q},
    {"null_q_idx_scale", I8, DSOPS_ERR_NULL, null_qs},
    {"null_weights", I8, DSOPS_ERR_NULL, null_w},
    {"null_weights_bf16", BF, DSOPS_ERR_NULL, null_w},
    {"null_key_cache", I8, DSOPS_ERR_NULL, null_key},
    {"null_key_scale_cache", I8, DSOPS_ERR_NULL, null_ks},
    {"null_block_table", I8, DSOPS_ERR_NULL, null_table},
    {"null_cu_seqlens_q", BF, DSOPS_ERR_NULL, null_cu},
    {"null_seqused_kv", I8, DSOPS_ERR_NULL, null_used},
    {"null_topk_indices", I8, DSOPS_ERR_NULL, null_topk},
    {"rank_q_idx", I8, DSOPS_ERR_SHAPE, rank_q},
    {"rank_weights", BF, DSOPS_ERR_SHAPE, rank_w},
    {"rank_key_cache", I8, DSOPS_ERR_SHAPE, rank_key},
    {"rank_key_scale_cache", I8, DSOPS_ERR_SHAPE, rank_ks},
    {"rank_block_table", I8, DSOPS_ERR_SHAPE, rank_table},
    {"rank_topk_indices", BF, DSOPS_ERR_SHAPE, rank_topk},
    {"rank_topk_scores", I8, DSOPS_ERR_SHAPE, rank_scores},
    {"shape_weights_ni", I8, DSOPS_ERR_SHAPE, shape_w_ni},
    {"shape_weights_t", BF, DSOPS_ERR_SHAPE, shape_w_t},
    {"shape_q_idx_scale_ni", I8, DSOPS_ERR_SHAPE, shape_qs_ni},
    {"shape_q_idx_scale_t", I8, DSOPS_ERR_SHAPE, shape_qs_t},
    {"shape_key_cache_di", I8, DSOPS_ERR_SHAPE, shape_key_di},
    {"shape_key_cache_di_bf16", BF, DSOPS_ERR_SHAPE, shape_key_di},
    {"shape_key_scale_cache_bs", I8, DSOPS_ERR_SHAPE, shape_ks_bs},
    {"shape_key_scale_cache_nb", I8, DSOPS_ERR_SHAPE, shape_ks_nb},
    {"shape_seqused_kv", I8, DSOPS_ERR_SHAPE, shape_used},
    {"shape_block_table_b", BF, DSOPS_ERR_SHAPE, shape_table_b},
    {"shape_topk_indices_t", I8, DSOPS_ERR_SHAPE, shape_topk_t},
    {"shape_topk_scores_k", I8, DSOPS_ERR_SHAPE, shape_scores_k},
    {"shape_topk_scores_t", BF, DSOPS_ERR_SHAPE, shape_scores_t},
    {"shape_k_zero", I8, DSOPS_ERR_SHAPE, shape_k0},
    {"shape_ni_zero", I8, DSOPS_ERR_SHAPE, shape_ni0},
    {"shape_di_zero", BF, DSOPS_ERR_SHAPE, shape_di0},
    {"shape_di_beyond_int8_limit", I8, DSOPS_ERR_SHAPE, shape_di_big},
    {"shape_cu_seqlens_empty", I8, DSOPS_ERR_SHAPE, shape_cu_empty},
    {"dtype_int8_q_bf16_keys", I8, DSOPS_ERR_DTYPE, dt_key_bf16},
    {"dtype_bf16_q_int8_keys", BF, DSOPS_ERR_DTYPE, dt_key_int8},
    {"dtype_q_idx_fp16", I8, DSOPS_ERR_DTYPE, dt_q_fp16},
    {"dtype_int8_weights_bf16", I8, DSOPS_ERR_DTYPE, dt_w_bf16},
    {"dtype_bf16_weights_fp16", BF, DSOPS_ERR_DTYPE, dt_w_fp16},
    {"dtype_weights_fp32", I8, DSOPS_ERR_DTYPE, dt_w_fp32},
    {"dtype_q_idx_scale", I8, DSOPS_ERR_DTYPE, dt_qs},
    {"dtype_key_scale_cache", I8, DSOPS_ERR_DTYPE, dt_ks},
    {"dtype_block_table", I8, DSOPS_ERR_DTYPE, dt_table},
    {"dtype_cu_seqlens_q", BF, DSOPS_ERR_DTYPE, dt_cu},
    {"dtype_seqused_kv", I8, DSOPS_ERR_DTYPE, dt_used},
    {"dtype_topk_indices", I8, DSOPS_ERR_DTYPE, dt_topk},
    {"dtype_topk_scores", BF, DSOPS_ERR_DTYPE, dt_scores},
    {"bf16_with_q_idx_scale", BF, DSOPS_ERR_PARAM, bf16_with_qs},
    {"bf16_with_key_scale_cache", BF, DSOPS_ERR_PARAM, bf16_with_ks},
    {"cmp_ratio_zero", I8, DSOPS_ERR_PARAM, ratio_zero},
    {"cmp_ratio_negative", BF, DSOPS_ERR_PARAM, ratio_negative},
    {"cu_first_not_zero", I8, DSOPS_ERR_INDEX, cu_first},
    {"cu_decreasing", I8, DSOPS_ERR_INDEX, cu_decreasing},
    {"cu_last_below_t", BF, DSOPS_ERR_INDEX, cu_last_below},
    {"cu_last_above_t", I8, DSOPS_ERR_INDEX, cu_last_above},
    {"cu_middle_above_t", I8, DSOPS_ERR_INDEX, cu_middle_above},
    {"seqused_negative", I8, DSOPS_ERR_INDEX, used_negative},
    {"seqused_int32_min", BF, DSOPS_ERR_INDEX, used_min},
    {"block_entry_99", I8, DSOPS_ERR_INDEX, table_big},
    {"block_entry_99_bf16", BF, DSOPS_ERR_INDEX, table_big},
    {"block_entry_minus1", I8, DSOPS_ERR_INDEX, table_neg},
    {"block_entry_nb", BF, DSOPS_ERR_INDEX, table_nb},
    {"block_entry_int32_min", I8, DSOPS_ERR_INDEX, table_min},
    {"block_column_beyond_mb", I8, DSOPS_ERR_INDEX, table_narrow},
    {"block_column_beyond_mb_bf16", BF, DSOPS_ERR_INDEX, table_narrow},
    {"block_column_seqused_grows", I8, DSOPS_ERR_INDEX, table_used_grows},
    {"block_entry_ratio4", I8, DSOPS_ERR_INDEX, table_ratio4},
    {"alias_topk_q_idx", I8, DSOPS_ERR_ALIAS, alias_topk_q},
    {"alias_topk_key_cache", I8, DSOPS_ERR_ALIAS, alias_topk_key},
    {"alias_topk_key_cache_bf16", BF, DSOPS_ERR_ALIAS, alias_topk_key},
    {"alias_topk_weights", BF, DSOPS_ERR_ALIAS, alias_topk_w},
    {"alias_topk_block_table", I8, DSOPS_ERR_ALIAS, alias_topk_table},
    {"alias_topk_key_scale_cache", I8, DSOPS_ERR_ALIAS, alias_topk_ks},
    {"alias_scores_topk", I8, DSOPS_ERR_ALIAS, alias_scores_topk},
    {"alias_scores_q_idx_scale", I8, DSOPS_ERR_ALIAS, alias_scores_qs},
    {"alias_scores_seqused_kv", BF, DSOPS_ERR_ALIAS, alias_scores_used},
    {"alias_scores_topk_tail", BF, DSOPS_ERR_ALIAS, alias_scores_topk_tail},
    {"fp8_weights_bf16", BF, DSOPS_ERR_DTYPE, fp8_w_bf16},
    {"fp8_q_idx_bf16_keys", BF, DSOPS_ERR_DTYPE, fp8_key_bf16},
    {"fp8_without_key_scale_cache", BF, DSOPS_ERR_NULL, fp8_no_ks},
    {"fp8_key_scale_cache_fp16", BF, DSOPS_ERR_DTYPE, fp8_ks_fp16},
    {"fp8_with_q_idx_scale", BF, DSOPS_ERR_PARAM, fp8_with_qs},
    {"fp8_key_scale_cache_bs", BF, DSOPS_ERR_SHAPE, fp8_ks_shape},
    {"logits_narrower_than_keys", BF, DSOPS_ERR_INDEX, logits_narrow},
    {"logits_narrower_than_keys_int8", I8, DSOPS_ERR_INDEX, logits_narrow},
    {"dtype_logits", I8, DSOPS_ERR_DTYPE, logits_dtype},
    {"rank_logits", BF, DSOPS_ERR_SHAPE, logits_rank},
    {"shape_logits_t", I8, DSOPS_ERR_SHAPE, logits_rows},
    {"alias_logits_topk_scores", BF, DSOPS_ERR_ALIAS, logits_alias},
    {"alias_logits_key_cache", I8, DSOPS_ERR_ALIAS, logits_alias_key},
};

/* ---- valid but suspicious ---------------------------------------------------------------------------- */
static void garbage_everywhere_unneeded(void *problem)
{
    lp_problem *p = problem;
    static const int needed[3] = {5, 8, 1};
    for (int b = 0; b < 3; b++)
        for (int64_t c = needed[b]; c < p->MB; c++)
            p->table[b * p->MB + c] = (int32_t)(c % 3 == 0 ? INT32_MIN : (c % 3 == 1 ? INT32_MAX : -1));
}
/* cmp_ratio 4: sequence 0 (75 keys) needs columns 0-1, sequence 1 (125 keys) 0-1, sequence 2 (10) 0 */
static void ratio4_garbage(void *problem)
{
    lp_problem *p = problem;
    p->args.cmp_ratio = 4;
    for (int b = 0; b < 3; b++)
        for (int64_t c = b == 2 ? 1 : 2; c < p->MB; c++)
            p->table[b * p->MB + c] = 99999;
}
/* sequence 1 holds no token of the call (cu 0, 3, 3, 5): its table row and seqused are never used */
static void sequence_without_tokens(void *problem)
{
    lp_problem *p = problem;
    p->cu[1] = 3, p->cu[2] = 3;
    p->used[1] = INT32_MAX;
    for (int64_t c = 0; c < p->MB; c++)
        p->table[1 * p->MB + c] = -1;
}
/* sequence 2 sees fewer original tokens than cmp_ratio: no key, no table entry needed */
static void below_ratio(void *problem)
{
    lp_problem *p = problem;
    p->args.cmp_ratio = 64;
    p->used[2] = 63; /* tokens 3, 4: L = 62, 63 -> n = 0 */
    for (int64_t c = 0; c < p->MB; c++)
        p->table[2 * p->MB + c] = INT32_MIN;
    for (int b = 0; b < 2; b++) /* sequences 0, 1: 4 and 7 keys, column 0 */
        for (int64_t c = 1; c < p->MB; c++)
            p->table[b * p->MB + c] = -1;
}
static void seqused_zero(void *problem)
{
    lp_problem *p = problem;
    p->used[0] = 0; /* tokens 0, 1: L = -1, 0 */
    for (int64_t c = 0; c < p->MB; c++)
        p->table[0 * p->MB + c] = 99999;
}
static void no_scores(void *problem) { lp_problem *p = problem; p->args.topk_scores.data = NULL; }
/* logits exactly as wide as the most keys a token sees (500, sequence 1) */
static void logits_exact_width(void *problem) { with_logits(problem, 500); }
static void empty_call(void *problem)
{
    lp_problem *p = problem;
    p->cu[1] = p->cu[2] = p->cu[3] = 0;
    p->args.q_idx.shape[0] = 0;
    p->args.weights.shape[0] = 0;
    if (p->args.q_idx_scale.data)
        p->args.q_idx_scale.shape[0] = 0;
    p->args.topk_indices.shape[0] = 0;
    p->args.topk_scores.shape[0] = 0;
    p->T = 0;
    for (int64_t i = 0; i < 3 * p->MB; i++)
        p->table[i] = -1; /* nothing is needed */
}

static const val_ok_case ok_cases[] = {
    {"garbage_in_unneeded_table_entries", I8, garbage_everywhere_unneeded},
    {"garbage_in_unneeded_table_entries_bf16", BF, garbage_everywhere_unneeded},
    {"ratio4_garbage_beyond_needed", I8, ratio4_garbage},
    {"sequence_without_tokens", I8, sequence_without_tokens},
    {"sequence_without_tokens_bf16", BF, sequence_without_tokens},
    {"fewer_tokens_than_cmp_ratio", I8, below_ratio},
    {"seqused_zero_garbage_row", BF, seqused_zero},
    {"no_topk_scores", I8, no_scores},
    {"logits_as_wide_as_the_keys", BF, logits_exact_width},
    {"empty_call_t0", I8, empty_call},
};

/* ---- the operator for the table runner ------------------------------------------------------------- */

/* Adapters of the lightning_indexer problems (problems.h); every validation program has them in
 * this shape, over its own problem type. */
static void *make_problem(int int8) { return base(int8); }
static void free_problem(void *p) { lp_free(p); }
static dsops_status call(dsops_context *c, void *p) { return dsops_lightning_indexer(c, &((lp_problem *)p)->args); }
static void arm(void *p) { lp_reset_outputs(p); }
static void untouched(void *p, const char *name)
{
    tu_check(lp_outputs_untouched(p), "%s: topk_indices / topk_scores written although the call failed", name);
}
/* the oracle's result is kept in the problem */
static void *oracle(void *p)
{
    lp_compute_ref(p);
    return p;
}
static void compare(void *problem, void *expected, const val_ok_case *c)
{
    (void)expected;
    lp_problem *p = problem;
    lp_check(p, c->name);
    if (p->T == 0)
        tu_check(lp_outputs_untouched(p), "%s: outputs written by an empty call", c->name);
}

static const val_ops li_ops = {
    .make = make_problem, .free = free_problem, .call = call, .arm = arm, .untouched = untouched,
    .oracle = oracle, .compare = compare,
};

static void test_init(void)
{
    if (!tu_selected("init"))
        return;
    dsops_lightning_indexer_args a;
    static const struct {
        dsops_preset preset;
        int ratio;
    } presets[] = {{DSOPS_PRESET_V32, 1}, {DSOPS_PRESET_V4_FLASH, 4}, {DSOPS_PRESET_V4_PRO, 4}};
    for (int i = 0; i < 3; i++) {
        memset(&a, 0x5a, sizeof a);
        dsops_status st = dsops_lightning_indexer_init(&a, presets[i].preset);
        tu_check(st == DSOPS_OK, "init(preset %d): %s", (int)presets[i].preset, dsops_status_name(st));
        tu_check(a.cmp_ratio == presets[i].ratio, "init(preset %d): cmp_ratio %d, expected %d",
                 (int)presets[i].preset, a.cmp_ratio, presets[i].ratio);
        tu_check(a.q_idx.data == NULL && a.q_idx_scale.data == NULL && a.weights.data == NULL &&
                     a.key_cache.data == NULL && a.key_scale_cache.data == NULL && a.block_table.data == NULL &&
                     a.cu_seqlens_q.data == NULL && a.seqused_kv.data == NULL && a.topk_indices.data == NULL &&
                     a.topk_scores.data == NULL,
                 "init(preset %d): tensors not cleared", (int)presets[i].preset);
    }
    dsops_status st = dsops_lightning_indexer_init(&a, (dsops_preset)17);
    tu_check(st == DSOPS_ERR_PARAM, "init(preset 17): %s, expected DSOPS_ERR_PARAM", dsops_status_name(st));
    st = dsops_lightning_indexer_init(NULL, DSOPS_PRESET_V32);
    tu_check(st != DSOPS_OK, "init(NULL) succeeded");
    st = dsops_lightning_indexer(ctx, NULL);
    tu_check(st == DSOPS_ERR_NULL, "call with args NULL: %s, expected DSOPS_ERR_NULL", dsops_status_name(st));
}

/* a NULL context uses a temporary one with the environment defaults */
static const val_ok_case null_context_cases[] = {{"null_context", I8, NULL}};

/* The order of every validation program (tests/validation.h): init, the bad rows, the ok rows and its own cases. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    ctx = tu_context();
    test_init();
    val_run_bad(&li_ops, ctx, bad_cases, VAL_COUNT(bad_cases));
    val_run_ok(&li_ops, ctx, ok_cases, VAL_COUNT(ok_cases));
    val_run_ok(&li_ops, NULL, null_context_cases, VAL_COUNT(null_context_cases));
    dsops_context_destroy(ctx);
    return tu_finish();
}
