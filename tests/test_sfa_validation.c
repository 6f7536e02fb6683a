/* Argument validation of sparse_flash_attention_v32 (spec §1.6 V1-V10, §4.4 "Validation"):
 * a table of bad argument sets, each with its expected status and a message fragment (field name with
 * brackets and the value). After every error `out` and `lse` must be untouched. A second table holds
 * argument sets that look suspicious but are valid (garbage in unused table entries, skipped indices). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problems_check.h"
#include "test_util.h"
#include "validation.h"

static dsops_context *ctx;

/* The base problem: 3 sequences (S 2, 1, 2; seqused 300, 500, 40), N 2, Dc 128 (512 for packed_int8),
 * Dr 64, K 8, BS 64. Every index lies in the first block of its sequence, every table column >= 1 holds
 * garbage, so only column 0 is needed. Tokens: 0, 1 (seq 0), 2 (seq 1), 3, 4 (seq 2). */
static tp_problem *base(dsops_kv_layout layout)
{
    tp_spec s;
    memset(&s, 0, sizeof s);
    s.B = 3;
    s.S[0] = 2, s.S[1] = 1, s.S[2] = 2;
    s.seqused[0] = 300, s.seqused[1] = 500, s.seqused[2] = 40;
    s.N = 2;
    s.Dc = layout == DSOPS_KV_PACKED_INT8 || layout == DSOPS_KV_FLASHMLA_FP8 ? 512 : 128;
    s.Dr = 64;
    s.K = 8;
    s.BS = 64;
    s.layout = layout;
    s.with_lse = 1;
    s.with_topk_length = 1;
    s.with_sinks = 1;
    s.index_mode = TP_IDX_VALID;
    tp_problem *p = tp_make(&s, 1234);
    for (int64_t t = 0; t < p->T; t++) {
        p->len[t] = 8;
        for (int j = 0; j < 8; j++)
            p->idx[t * 8 + j] = (j * 37) % (t >= 3 ? 40 : 64);
    }
    for (int b = 0; b < 3; b++)
        for (int64_t c = 1; c < p->MB; c++)
            p->table[b * p->MB + c] = c % 2 ? 99999 : -1;
    return p;
}

#define FRAG(...) snprintf(frag, VAL_FRAG_MAX, __VA_ARGS__)

/* ---- V2 NULL ------------------------------------------------------------------------------------- */
static void null_q_nope(void *problem, char *frag) { tp_problem *p = problem; p->args.q_nope.data = NULL; FRAG("q_nope"); }
static void null_q_rope(void *problem, char *frag) { tp_problem *p = problem; p->args.q_rope.data = NULL; FRAG("q_rope"); }
static void null_key_nope(void *problem, char *frag) { tp_problem *p = problem; p->args.key_nope.data = NULL; FRAG("key_nope"); }
static void null_key_scale(void *problem, char *frag) { tp_problem *p = problem; p->args.key_nope_scale.data = NULL; FRAG("key_nope_scale"); }
static void null_key_rope(void *problem, char *frag) { tp_problem *p = problem; p->args.key_rope.data = NULL; FRAG("key_rope"); }
static void null_kv_packed(void *problem, char *frag) { tp_problem *p = problem; p->args.kv_packed.data = NULL; FRAG("kv_packed"); }
static void null_topk(void *problem, char *frag) { tp_problem *p = problem; p->args.topk_indices.data = NULL; FRAG("topk_indices"); }
static void null_table(void *problem, char *frag) { tp_problem *p = problem; p->args.block_table.data = NULL; FRAG("block_table"); }
static void null_cu(void *problem, char *frag) { tp_problem *p = problem; p->args.cu_seqlens_q.data = NULL; FRAG("cu_seqlens_q"); }
static void null_used(void *problem, char *frag) { tp_problem *p = problem; p->args.seqused_kv.data = NULL; FRAG("seqused_kv"); }
static void null_out(void *problem, char *frag) { tp_problem *p = problem; p->args.out.data = NULL; FRAG("out"); }

/* ---- V3 shapes ------------------------------------------------------------------------------------ */
static void rank_q_rope(void *problem, char *frag) { tp_problem *p = problem; p->args.q_rope.ndim = 2; FRAG("q_rope has rank 2"); }
static void rank_out(void *problem, char *frag) { tp_problem *p = problem; p->args.out.ndim = 4; p->args.out.shape[3] = 1; p->args.out.stride[3] = 1; FRAG("out has rank 4"); }
static void rank_table(void *problem, char *frag) { tp_problem *p = problem; p->args.block_table.ndim = 1; FRAG("block_table has rank 1"); }
static void shape_q_rope_n(void *problem, char *frag) { tp_problem *p = problem; p->args.q_rope.shape[1] = 1; FRAG("q_rope.shape[1] = 1"); }
static void shape_q_rope_t(void *problem, char *frag) { tp_problem *p = problem; p->args.q_rope.shape[0] = 4; FRAG("q_rope.shape[0] = 4"); }
static void shape_out_dc(void *problem, char *frag) { tp_problem *p = problem; p->args.out.shape[2] -= 1; FRAG("out.shape[2] = %lld", (long long)p->args.out.shape[2]); }
static void shape_out_n(void *problem, char *frag) { tp_problem *p = problem; p->args.out.shape[1] = 1; FRAG("out.shape[1] = 1"); }
static void shape_lse(void *problem, char *frag) { tp_problem *p = problem; p->args.lse.shape[1] = 1; FRAG("lse.shape[1] = 1"); }
static void shape_topk_t(void *problem, char *frag) { tp_problem *p = problem; p->args.topk_indices.shape[0] = 4; FRAG("topk_indices.shape[0] = 4"); }
static void shape_len(void *problem, char *frag) { tp_problem *p = problem; p->args.topk_length.shape[0] = 4; FRAG("topk_length.shape[0] = 4"); }
static void shape_sinks(void *problem, char *frag) { tp_problem *p = problem; p->args.sinks.shape[0] = 1; FRAG("sinks.shape[0] = 1"); }
static void dtype_sinks(void *problem, char *frag) { tp_problem *p = problem; p->args.sinks.dtype = DSOPS_BF16; FRAG("sinks has dtype bf16"); }
static void alias_lse_sinks(void *problem, char *frag) { tp_problem *p = problem; p->args.lse.data = p->sinks; FRAG("sinks"); }
/* max_logits [T, N] fp32 views of a buffer with room for any of them */
static float max_buf[1024];
static void max_view(tp_problem *p, dsops_dtype dt, int64_t n_extra)
{
    p->args.max_logits = dsops_tensor_make(max_buf, dt, 2, (const int64_t[]){p->T, p->sp.N + n_extra});
}
static void shape_max(void *problem, char *frag) { tp_problem *p = problem; max_view(p, DSOPS_FP32, 1); FRAG("max_logits.shape[1] = 3"); }
static void dtype_max(void *problem, char *frag) { tp_problem *p = problem; max_view(p, DSOPS_BF16, 0); FRAG("max_logits has dtype bf16"); }
static void alias_max_lse(void *problem, char *frag) { tp_problem *p = problem; max_view(p, DSOPS_FP32, 0); p->args.max_logits.data = p->args.lse.data; FRAG("max_logits"); }
static void shape_scale(void *problem, char *frag) { tp_problem *p = problem; p->args.key_nope_scale.shape[2] = 2; FRAG("key_nope_scale.shape[2] = 2"); }
static void shape_key_rope_bs(void *problem, char *frag) { tp_problem *p = problem; p->args.key_rope.shape[1] = 63; FRAG("key_rope.shape[1] = 63"); }
static void shape_key_rope_dr(void *problem, char *frag) { tp_problem *p = problem; p->args.key_rope.shape[2] = 32; FRAG("key_rope.shape[2] = 32"); }
static void shape_key_nope_dc(void *problem, char *frag) { tp_problem *p = problem; p->args.key_nope.shape[2] = 64; FRAG("key_nope.shape[2] = 64"); }
static void shape_used(void *problem, char *frag) { tp_problem *p = problem; p->args.seqused_kv.shape[0] = 2; FRAG("seqused_kv.shape[0] = 2"); }
static void shape_table_b(void *problem, char *frag) { tp_problem *p = problem; p->args.block_table.shape[0] = 2; FRAG("block_table.shape[0] = 2"); }
static void shape_packed_row(void *problem, char *frag) { tp_problem *p = problem; p->args.kv_packed.shape[2] = 655; FRAG("kv_packed.shape[2] = 655"); }
/* int8 layouts need Dc % 128 == 0: narrow every Dc-sized view to 64 (valid memory, smaller extents) */
static void int8_dc64(void *problem, char *frag)
{
    tp_problem *p = problem;
    p->args.q_nope.shape[2] = 64;
    p->args.key_nope.shape[2] = 64;
    p->args.out.shape[2] = 64;
    FRAG("shape[2] = 64");
}
static void packed_dc256(void *problem, char *frag)
{
    tp_problem *p = problem;
    p->args.q_nope.shape[2] = 256;
    p->args.out.shape[2] = 256;
    FRAG("shape[2] = 256");
}
/* the message names the layout that requires Dc 512 */
static void fp8_dc256(void *problem, char *frag)
{
    packed_dc256(problem, frag);
    FRAG("flashmla_fp8");
}
static void packed_dr32(void *problem, char *frag) { tp_problem *p = problem; p->args.q_rope.shape[2] = 32; FRAG("shape[2] = 32"); }

/* ---- V4 dtypes ------------------------------------------------------------------------------------ */
static void dtype_key_nope(void *problem, char *frag) { tp_problem *p = problem; p->args.key_nope.dtype = DSOPS_BF16; FRAG("key_nope has dtype bf16"); }
static void dtype_key_nope_bf16(void *problem, char *frag) { tp_problem *p = problem; p->args.key_nope.dtype = DSOPS_INT8; FRAG("key_nope has dtype int8"); }
static void dtype_q_nope(void *problem, char *frag) { tp_problem *p = problem; p->args.q_nope.dtype = DSOPS_FP16; FRAG("q_nope has dtype fp16"); }
static void dtype_lse(void *problem, char *frag) { tp_problem *p = problem; p->args.lse.dtype = DSOPS_BF16; FRAG("lse has dtype bf16"); }
static void dtype_out(void *problem, char *frag) { tp_problem *p = problem; p->args.out.dtype = DSOPS_FP16; FRAG("out has dtype fp16"); }
static void dtype_topk(void *problem, char *frag) { tp_problem *p = problem; p->args.topk_indices.dtype = DSOPS_UINT8; FRAG("topk_indices has dtype uint8"); }
static void dtype_scale(void *problem, char *frag) { tp_problem *p = problem; p->args.key_nope_scale.dtype = DSOPS_FP16; FRAG("key_nope_scale has dtype fp16"); }
static void dtype_packed(void *problem, char *frag) { tp_problem *p = problem; p->args.kv_packed.dtype = DSOPS_INT8; FRAG("kv_packed has dtype int8"); }
static void dtype_table(void *problem, char *frag) { tp_problem *p = problem; p->args.block_table.dtype = DSOPS_INT8; FRAG("block_table has dtype int8"); }

/* ---- V5 parameters -------------------------------------------------------------------------------- */
static void scale_nan(void *problem, char *frag) { tp_problem *p = problem; p->args.softmax_scale = NAN; FRAG("softmax_scale"); }
static void scale_inf(void *problem, char *frag) { tp_problem *p = problem; p->args.softmax_scale = -INFINITY; FRAG("softmax_scale"); }
static void bad_p_mode(void *problem, char *frag) { tp_problem *p = problem; p->args.p_mode = (dsops_p_mode)7; FRAG("p_mode"); }
static void bad_layout(void *problem, char *frag) { tp_problem *p = problem; p->args.kv_layout = (dsops_kv_layout)9; FRAG("kv_layout"); }
static void bad_p_tile(void *problem, char *frag) { tp_problem *p = problem; p->args.p_mode = DSOPS_P_TILED; p->args.p_tile = 0; FRAG("p_tile"); }

/* ---- V6 sequences ----------------------------------------------------------------------------------- */
static void cu_first(void *problem, char *frag) { tp_problem *p = problem; p->cu[0] = 1; FRAG("cu_seqlens_q[0] = 1"); }
static void cu_decreasing(void *problem, char *frag) { tp_problem *p = problem; p->cu[2] = 1; FRAG("cu_seqlens_q["); } /* 0, 2, 1, 5 */
static void cu_last(void *problem, char *frag) { tp_problem *p = problem; p->cu[3] = 4; FRAG("cu_seqlens_q[3] = 4"); }
static void cu_over(void *problem, char *frag) { tp_problem *p = problem; p->cu[3] = 6; FRAG("cu_seqlens_q[3] = 6"); }
static void used_negative(void *problem, char *frag) { tp_problem *p = problem; p->used[2] = -1; FRAG("seqused_kv[2] = -1"); }
static void len_negative(void *problem, char *frag) { tp_problem *p = problem; p->len[1] = -3; FRAG("topk_length[1] = -3"); }

/* ---- V7 paged access -------------------------------------------------------------------------------- */
/* token 2 (sequence 1) uses position 197: block-table column 3, whose entry is out of [0, NB) */
static void table_entry_big(void *problem, char *frag)
{
    tp_problem *p = problem;
    p->idx[2 * 8 + 5] = 197;
    p->table[1 * p->MB + 3] = 99;
    FRAG("block_table[1][3] = 99");
}
static void table_entry_neg(void *problem, char *frag)
{
    tp_problem *p = problem;
    p->idx[2 * 8 + 0] = 197;
    p->table[1 * p->MB + 3] = -1;
    FRAG("block_table[1][3] = -1");
}
static void table_entry_nb(void *problem, char *frag)
{
    tp_problem *p = problem;
    p->idx[4 * 8 + 7] = 10; /* sequence 2, column 0 */
    p->table[2 * p->MB + 0] = (int32_t)p->NB;
    FRAG("block_table[2][0] = %lld", (long long)p->NB);
}
/* a used position whose block column is >= MB: narrow the table view to one column */
static void table_column(void *problem, char *frag)
{
    tp_problem *p = problem;
    p->idx[2 * 8 + 1] = 197;
    p->args.block_table.shape[1] = 1;
    FRAG("block_table column");
}

/* ---- V9 aliasing ------------------------------------------------------------------------------------ */
static void alias_out_q(void *problem, char *frag) { tp_problem *p = problem; p->args.out.data = p->args.q_nope.data; FRAG("overlaps"); }
static void alias_out_key(void *problem, char *frag) { tp_problem *p = problem; p->args.out.data = p->args.key_nope.data; FRAG("overlaps"); }
static void alias_out_packed(void *problem, char *frag) { tp_problem *p = problem; p->args.out.data = p->args.kv_packed.data; FRAG("overlaps"); }
static void alias_lse_out(void *problem, char *frag) { tp_problem *p = problem; p->args.lse.data = p->args.out.data; FRAG("overlaps"); }
static void alias_out_lse_partial(void *problem, char *frag)
{
    tp_problem *p = problem;
    /* lse overlapping only the last bytes of out */
    p->args.lse.data = (char *)p->args.out.data + ((p->args.out.shape[0] - 1) * p->args.out.stride[0]) * 2;
    FRAG("overlaps");
}

#define I8 DSOPS_KV_SPLIT_INT8
#define BF DSOPS_KV_SPLIT_BF16
#define PK DSOPS_KV_PACKED_INT8
#define F8 DSOPS_KV_FLASHMLA_FP8

/* The rule table (validation.h): its rows look like every validation program's rows, in shape only; each is
 * one rule of this operator's fields. */
/* variant: the kv layout */
static const val_bad_case bad_cases[] = {
    {"null_q_nope", I8, DSOPS_ERR_NULL, null_q_nope},
    {"null_q_rope", I8, DSOPS_ERR_NULL, null_q_rope},
    {"null_key_nope", I8, DSOPS_ERR_NULL, null_key_nope},
    {"null_key_nope_bf16", BF, DSOPS_ERR_NULL, null_key_nope},
    {"null_key_nope_scale", I8, DSOPS_ERR_NULL, null_key_scale},
    {"null_key_rope", I8, DSOPS_ERR_NULL, null_key_rope},
    {"null_kv_packed", PK, DSOPS_ERR_NULL, null_kv_packed},
    {"null_topk_indices", I8, DSOPS_ERR_NULL, null_topk},
    {"null_block_table", I8, DSOPS_ERR_NULL, null_table},
    {"null_cu_seqlens_q", I8, DSOPS_ERR_NULL, null_cu},
    {"null_seqused_kv", I8, DSOPS_ERR_NULL, null_used},
    {"null_out", I8, DSOPS_ERR_NULL, null_out},
    {"rank_q_rope", I8, DSOPS_ERR_SHAPE, rank_q_rope},
    {"rank_out", I8, DSOPS_ERR_SHAPE, rank_out},
    {"rank_block_table", I8, DSOPS_ERR_SHAPE, rank_table},
    {"shape_q_rope_n", I8, DSOPS_ERR_SHAPE, shape_q_rope_n},
    {"shape_q_rope_t", I8, DSOPS_ERR_SHAPE, shape_q_rope_t},
    {"shape_out_dc", I8, DSOPS_ERR_SHAPE, shape_out_dc},
    {"shape_out_n", BF, DSOPS_ERR_SHAPE, shape_out_n},
    {"shape_lse", I8, DSOPS_ERR_SHAPE, shape_lse},
    {"shape_topk_t", I8, DSOPS_ERR_SHAPE, shape_topk_t},
    {"shape_topk_length", I8, DSOPS_ERR_SHAPE, shape_len},
    {"shape_sinks", I8, DSOPS_ERR_SHAPE, shape_sinks},
    {"dtype_sinks", I8, DSOPS_ERR_DTYPE, dtype_sinks},
    {"alias_lse_sinks", I8, DSOPS_ERR_ALIAS, alias_lse_sinks},
    {"shape_max_logits", I8, DSOPS_ERR_SHAPE, shape_max},
    {"dtype_max_logits", I8, DSOPS_ERR_DTYPE, dtype_max},
    {"alias_max_logits_lse", I8, DSOPS_ERR_ALIAS, alias_max_lse},
    {"shape_key_nope_scale", I8, DSOPS_ERR_SHAPE, shape_scale},
    {"shape_key_rope_bs", I8, DSOPS_ERR_SHAPE, shape_key_rope_bs},
    {"shape_key_rope_dr", BF, DSOPS_ERR_SHAPE, shape_key_rope_dr},
    {"shape_key_nope_dc", BF, DSOPS_ERR_SHAPE, shape_key_nope_dc},
    {"shape_seqused_kv", I8, DSOPS_ERR_SHAPE, shape_used},
    {"shape_block_table_b", I8, DSOPS_ERR_SHAPE, shape_table_b},
    {"shape_kv_packed_row", PK, DSOPS_ERR_SHAPE, shape_packed_row},
    {"int8_dc_not_multiple_of_128", I8, DSOPS_ERR_SHAPE, int8_dc64},
    {"packed_dc_not_512", PK, DSOPS_ERR_SHAPE, packed_dc256},
    {"packed_dr_not_64", PK, DSOPS_ERR_SHAPE, packed_dr32},
    {"fp8_dc_not_512", F8, DSOPS_ERR_SHAPE, fp8_dc256},
    {"fp8_dr_not_64", F8, DSOPS_ERR_SHAPE, packed_dr32},
    {"shape_kv_packed_row_fp8", F8, DSOPS_ERR_SHAPE, shape_packed_row},
    {"null_kv_packed_fp8", F8, DSOPS_ERR_NULL, null_kv_packed},
    {"dtype_key_nope_int8_layout", I8, DSOPS_ERR_DTYPE, dtype_key_nope},
    {"dtype_key_nope_bf16_layout", BF, DSOPS_ERR_DTYPE, dtype_key_nope_bf16},
    {"dtype_q_nope", I8, DSOPS_ERR_DTYPE, dtype_q_nope},
    {"dtype_lse", I8, DSOPS_ERR_DTYPE, dtype_lse},
    {"dtype_out", I8, DSOPS_ERR_DTYPE, dtype_out},
    {"dtype_topk_indices", I8, DSOPS_ERR_DTYPE, dtype_topk},
    {"dtype_key_nope_scale", I8, DSOPS_ERR_DTYPE, dtype_scale},
    {"dtype_kv_packed", PK, DSOPS_ERR_DTYPE, dtype_packed},
    {"dtype_block_table", I8, DSOPS_ERR_DTYPE, dtype_table},
    {"softmax_scale_nan", I8, DSOPS_ERR_PARAM, scale_nan},
    {"softmax_scale_inf", BF, DSOPS_ERR_PARAM, scale_inf},
    {"p_mode_enum", I8, DSOPS_ERR_PARAM, bad_p_mode},
    {"kv_layout_enum", I8, DSOPS_ERR_PARAM, bad_layout},
    {"p_tile_zero", I8, DSOPS_ERR_PARAM, bad_p_tile},
    {"cu_first_not_zero", I8, DSOPS_ERR_INDEX, cu_first},
    {"cu_decreasing", I8, DSOPS_ERR_INDEX, cu_decreasing},
    {"cu_last_below_t", I8, DSOPS_ERR_INDEX, cu_last},
    {"cu_last_above_t", BF, DSOPS_ERR_INDEX, cu_over},
    {"seqused_negative", I8, DSOPS_ERR_INDEX, used_negative},
    {"topk_length_negative", I8, DSOPS_ERR_INDEX, len_negative},
    {"block_entry_99", I8, DSOPS_ERR_INDEX, table_entry_big},
    {"block_entry_99_bf16", BF, DSOPS_ERR_INDEX, table_entry_big},
    {"block_entry_99_packed", PK, DSOPS_ERR_INDEX, table_entry_big},
    {"block_entry_minus1", I8, DSOPS_ERR_INDEX, table_entry_neg},
    {"block_entry_nb", PK, DSOPS_ERR_INDEX, table_entry_nb},
    {"block_column_beyond_mb", I8, DSOPS_ERR_INDEX, table_column},
    {"block_column_beyond_mb_packed", PK, DSOPS_ERR_INDEX, table_column},
    {"alias_out_q_nope", I8, DSOPS_ERR_ALIAS, alias_out_q},
    {"alias_out_key_nope", I8, DSOPS_ERR_ALIAS, alias_out_key},
    {"alias_out_key_nope_bf16", BF, DSOPS_ERR_ALIAS, alias_out_key},
    {"alias_out_kv_packed", PK, DSOPS_ERR_ALIAS, alias_out_packed},
    {"alias_lse_out", I8, DSOPS_ERR_ALIAS, alias_lse_out},
    {"alias_lse_out_tail", BF, DSOPS_ERR_ALIAS, alias_out_lse_partial},
};

/* ---- valid but suspicious ---------------------------------------------------------------------------- */
/* positions whose table entries are garbage, but which no token uses */
static void skipped_beyond_length(void *problem)
{
    tp_problem *p = problem;
    p->len[2] = 3;
    p->idx[2 * 8 + 3] = 197;  /* j = 3 >= topk_length: never looked at */
    p->idx[2 * 8 + 7] = 499;
}
static void skipped_beyond_L(void *problem)
{
    tp_problem *p = problem;
    /* sequence 2 with seqused 5: token 3 (i = 0) sees L = 4, so j >= 4 is never looked at; an unneeded
     * column holds garbage */
    p->used[2] = 5;
    for (int j = 0; j < 8; j++)
        p->idx[3 * 8 + j] = j < 4 ? j : 64 + j; /* j >= 4 would need column 1 (garbage) */
    p->table[2 * p->MB + 1] = 99999;
}
static void skipped_invalid_values(void *problem)
{
    tp_problem *p = problem;
    static const int32_t zoo[] = {-1, -5, INT32_MIN, INT32_MAX, 500, 507, 1 << 30, -1};
    for (int j = 0; j < 8; j++)
        p->idx[2 * 8 + j] = zoo[j]; /* sequence 1: seqused 500, nothing used */
}
static void topk_length_zero_and_huge(void *problem)
{
    tp_problem *p = problem;
    p->len[0] = 0;
    p->len[1] = INT32_MAX;
    p->len[4] = 9;
}
static void garbage_everywhere_unused(void *problem)
{
    tp_problem *p = problem;
    for (int b = 0; b < 3; b++)
        for (int64_t c = 1; c < p->MB; c++)
            p->table[b * p->MB + c] = (int32_t)(c % 3 == 0 ? INT32_MIN : (c % 3 == 1 ? INT32_MAX : -1));
}
static void all_lonely(void *problem)
{
    tp_problem *p = problem;
    for (int64_t t = 0; t < p->T; t++)
        p->len[t] = 0;
    for (int64_t i = 0; i < 3 * p->MB; i++)
        p->table[i] = -1; /* nothing is needed, so nothing is checked */
}
static void empty_sequence_garbage_table(void *problem)
{
    tp_problem *p = problem;
    p->used[2] = 0; /* sequence 2 holds no token: its tokens are lonely, its table row is never read */
    for (int64_t c = 0; c < p->MB; c++)
        p->table[2 * p->MB + c] = 99999;
}

static const val_ok_case ok_cases[] = {
    {"skipped_beyond_topk_length", I8, skipped_beyond_length},
    {"skipped_beyond_topk_length_packed", PK, skipped_beyond_length},
    {"skipped_beyond_L", I8, skipped_beyond_L},
    {"skipped_beyond_L_bf16", BF, skipped_beyond_L},
    {"skipped_invalid_values", I8, skipped_invalid_values},
    {"topk_length_zero_and_huge", BF, topk_length_zero_and_huge},
    {"garbage_in_unused_table_entries", I8, garbage_everywhere_unused},
    {"garbage_in_unused_table_entries_packed", PK, garbage_everywhere_unused},
    {"all_lonely_table_all_minus1", I8, all_lonely},
    {"empty_sequence_garbage_table", I8, empty_sequence_garbage_table},
};

/* ---- the operator for the table runner ------------------------------------------------------------- */

/* Adapters of the sparse_flash_attention_v32 problems (problems.h); every validation program has them in
 * this shape, over its own problem type. */
static void *make_problem(int layout) { return base((dsops_kv_layout)layout); }
static void free_problem(void *p) { tp_free(p); }
static dsops_status call(dsops_context *c, void *p) { return dsops_sparse_flash_attention_v32(c, &((tp_problem *)p)->args); }
static void arm(void *p) { tp_reset_outputs(p); }
static void untouched(void *p, const char *name)
{
    tu_check(tp_outputs_untouched(p), "%s: out / lse written although the call failed", name);
}
/* the oracle's result is kept in the problem */
static void *oracle(void *p)
{
    tp_compute_ref(p);
    return p;
}
static void compare(void *p, void *expected, const val_ok_case *c)
{
    (void)expected;
    tp_check(p, c->name);
}

static const val_ops sfa_ops = {
    .make = make_problem, .free = free_problem, .call = call, .arm = arm, .untouched = untouched,
    .oracle = oracle, .compare = compare,
};

static void test_init(void)
{
    if (!tu_selected("init"))
        return;
    dsops_sparse_flash_attention_v32_args a;
    memset(&a, 0x5a, sizeof a);
    dsops_status st = dsops_sparse_flash_attention_v32_init(&a, DSOPS_PRESET_V32);
    tu_check(st == DSOPS_OK, "init(V32): %s", dsops_status_name(st));
    tu_check(fabsf(a.softmax_scale - 0.13523378f) < 1e-7f, "init(V32): softmax_scale %.9g, expected 0.13523378",
             (double)a.softmax_scale);
    tu_check(a.p_mode == DSOPS_P_NORMALISED && a.p_tile == 128 && a.kv_layout == DSOPS_KV_SPLIT_BF16,
             "init(V32): p_mode %d, p_tile %d, kv_layout %d", (int)a.p_mode, a.p_tile, (int)a.kv_layout);
    tu_check(a.q_nope.data == NULL && a.lse.data == NULL && a.topk_length.data == NULL && a.kv_packed.data == NULL,
             "init(V32): tensors not cleared");
    st = dsops_sparse_flash_attention_v32_init(&a, DSOPS_PRESET_V4_FLASH);
    tu_check(st == DSOPS_ERR_PARAM, "init(V4_FLASH): %s, expected DSOPS_ERR_PARAM", dsops_status_name(st));
    st = dsops_sparse_flash_attention_v32_init(NULL, DSOPS_PRESET_V32);
    tu_check(st != DSOPS_OK, "init(NULL) succeeded");
    st = dsops_sparse_flash_attention_v32(ctx, NULL);
    tu_check(st == DSOPS_ERR_NULL, "call with args NULL: %s, expected DSOPS_ERR_NULL", dsops_status_name(st));
}

/* a NULL context uses a temporary one with the environment defaults */
static const val_ok_case null_context_cases[] = {{"null_context", BF, NULL}};

/* The order of every validation program (tests/validation.h): init, the bad rows, the ok rows and its own cases. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    ctx = tu_context();
    test_init();
    val_run_bad(&sfa_ops, ctx, bad_cases, VAL_COUNT(bad_cases));
    val_run_ok(&sfa_ops, ctx, ok_cases, VAL_COUNT(ok_cases));
    val_run_ok(&sfa_ops, NULL, null_context_cases, VAL_COUNT(null_context_cases));
    dsops_context_destroy(ctx);
    return tu_finish();
}
