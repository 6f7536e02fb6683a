/* Operator descriptions (include/dsops.h, "Operator descriptions"): per operator its tensors, parameters, preset
 * initialiser, the rule that derives output shapes from the inputs, and the call. Bindings and the `dsops run`
 * tool are loops over this table. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dsops.h"

#define RUN_TENSOR(type, field, dir, dtypes, note) {#field, offsetof(type, field), dir, dtypes, note}
#define RUN_PARAM(type, field, kind, spellings, note) \
    {#field, kind, offsetof(type, field), sizeof(((type *)0)->field), spellings, note, false}
#define RUN_COUNT(a) (sizeof(a) / sizeof((a)[0]))


static const dsops_enum_value presets[] = {
    {"v32", DSOPS_PRESET_V32}, {"v4_flash", DSOPS_PRESET_V4_FLASH}, {"v4_pro", DSOPS_PRESET_V4_PRO}, {NULL, 0}};

static const dsops_enum_value run_p_modes[] = {
    {"normalised", DSOPS_P_NORMALISED}, {"tiled", DSOPS_P_TILED}, {"fp32", DSOPS_P_FP32}, {NULL, 0}};

static const dsops_enum_value run_kv_layouts[] = {{"split_bf16", DSOPS_KV_SPLIT_BF16},
                                                {"split_int8", DSOPS_KV_SPLIT_INT8},
                                                {"packed_int8", DSOPS_KV_PACKED_INT8},
                                                {"packed656", DSOPS_KV_PACKED_INT8}, /* the former spelling */
                                                {"flashmla_fp8", DSOPS_KV_FLASHMLA_FP8},
                                                {NULL, 0}};

/* ---- sparse_flash_attention_v32 ------------------------------------------------------------- */

typedef dsops_sparse_flash_attention_v32_args sfa_args;

static const dsops_tensor_desc sfa_tensors[] = {
    RUN_TENSOR(sfa_args, q_nope, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, N, Dc]"),
    RUN_TENSOR(sfa_args, q_rope, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, N, Dr]"),
    RUN_TENSOR(sfa_args, key_nope, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8),
               "[NB, BS, Dc], split layouts (I8: split_int8)"),
    RUN_TENSOR(sfa_args, key_nope_scale, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[NB, BS, Dc/128], split_int8"),
    RUN_TENSOR(sfa_args, key_rope, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[NB, BS, Dr], split layouts"),
    RUN_TENSOR(sfa_args, kv_packed, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_UINT8), "[NB, BS, 656], packed_int8 or flashmla_fp8"),
    RUN_TENSOR(sfa_args, topk_indices, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[T, K]"),
    RUN_TENSOR(sfa_args, topk_length, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_INT32), "[T]"),
    RUN_TENSOR(sfa_args, sinks, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[N], per-head sink logit"),
    RUN_TENSOR(sfa_args, block_table, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B, MB]"),
    RUN_TENSOR(sfa_args, cu_seqlens_q, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B+1]"),
    RUN_TENSOR(sfa_args, seqused_kv, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B]"),
    RUN_TENSOR(sfa_args, out, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, N, Dc]"),
    RUN_TENSOR(sfa_args, lse, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, N]"),
    RUN_TENSOR(sfa_args, max_logits, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, N], largest score"),
};

static const dsops_param_desc sfa_params[] = {
    RUN_PARAM(sfa_args, softmax_scale, DSOPS_PARAM_FLOAT, NULL, NULL),
    RUN_PARAM(sfa_args, p_mode, DSOPS_PARAM_ENUM, run_p_modes, NULL),
    RUN_PARAM(sfa_args, p_tile, DSOPS_PARAM_INT, NULL, "tile length of p_mode=tiled"),
    RUN_PARAM(sfa_args, kv_layout, DSOPS_PARAM_ENUM, run_kv_layouts,
              "default: packed_int8 if kv_packed is given (flashmla_fp8 rows, of the same size, must be named), split_int8 if key_nope is I8, else split_bf16"),
};
enum { SFA_PARAM_KV_LAYOUT = 3 };

static dsops_status sfa_init(void *args, dsops_preset preset)
{
    return dsops_sparse_flash_attention_v32_init(args, preset);
}

static void sfa_infer(void *args, const bool *given)
{
    sfa_args *a = args;
    if (!given[SFA_PARAM_KV_LAYOUT]) {
        if (a->kv_packed.data != NULL)
            a->kv_layout = DSOPS_KV_PACKED_INT8;
        else if (a->key_nope.data != NULL && a->key_nope.dtype == DSOPS_INT8)
            a->kv_layout = DSOPS_KV_SPLIT_INT8;
        else
            a->kv_layout = DSOPS_KV_SPLIT_BF16;
    }
}

static dsops_status sfa_output_shapes(void *args, char *msg, size_t len)
{
    sfa_args *a = args;
    if (a->q_nope.ndim != 3) {
        snprintf(msg, len, "q_nope has rank %d, expected 3 ([T, N, Dc])", a->q_nope.ndim);
        return DSOPS_ERR_SHAPE;
    }
    int64_t tnd[3] = {a->q_nope.shape[0], a->q_nope.shape[1], a->q_nope.shape[2]};
    a->out = dsops_tensor_make(NULL, DSOPS_BF16, 3, tnd);
    a->lse = dsops_tensor_make(NULL, DSOPS_FP32, 2, tnd);
    a->max_logits = dsops_tensor_make(NULL, DSOPS_FP32, 2, tnd);
    return DSOPS_OK;
}

static dsops_status sfa_call(dsops_context *ctx, const void *args)
{
    return dsops_sparse_flash_attention_v32(ctx, args);
}

/* ---- lightning_indexer ---------------------------------------------------------------------- */

/* The top-k width K is the extent of the outputs, so nothing in IN gives it: the tool keeps it next to
 * the operator's arguments as the required parameter `topk`. The operator's struct is the first member,
 * so the descriptor's args pointer is also a pointer to it. */
typedef struct li_run_args {
    dsops_lightning_indexer_args op;
    int topk;       /* 0 until given */
    int logits_len; /* LMAX of the optional logits output; 0: not produced */
} li_run_args;

#define LI_TENSOR(field, dir, dtypes, note) {#field, offsetof(li_run_args, op.field), dir, dtypes, note}
#define LI_TOPK_MAX (1 << 24) /* the library's limit on K */

static const dsops_tensor_desc li_tensors[] = {
    LI_TENSOR(q_idx, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT8) | DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP8_E4M3),
              "[T, NI, DI] (its dtype picks the variant: int8, bf16 or fp8)"),
    LI_TENSOR(q_idx_scale, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_FP16), "[T, NI], int8 variant"),
    LI_TENSOR(weights, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_FP16) | DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32),
              "[T, NI] (F16: int8, BF16: bf16, F32: fp8)"),
    LI_TENSOR(key_cache, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT8) | DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP8_E4M3),
              "[NB, BS, DI], dtype of q_idx"),
    LI_TENSOR(key_scale_cache, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_FP16) | DSOPS_DTYPE_BIT(DSOPS_FP32),
              "[NB, BS] (F16: int8 variant, F32: fp8)"),
    LI_TENSOR(block_table, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B, MB]"),
    LI_TENSOR(cu_seqlens_q, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B+1]"),
    LI_TENSOR(seqused_kv, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B], original token counts"),
    LI_TENSOR(topk_indices, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_INT32), "[T, K], K = topk"),
    LI_TENSOR(topk_scores, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, K]"),
    LI_TENSOR(logits, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, LMAX], LMAX = logits_len (when > 0)"),
};

static const dsops_param_desc li_params[] = {
    {"topk", DSOPS_PARAM_INT, offsetof(li_run_args, topk), sizeof(int), NULL,
     "K, the width of topk_indices and topk_scores (1 ... 2^24)", true},
    {"cmp_ratio", DSOPS_PARAM_INT, offsetof(li_run_args, op.cmp_ratio), sizeof(int), NULL,
     "preset v32: 1, v4_flash / v4_pro: 4", false},
    {"logits_len", DSOPS_PARAM_INT, offsetof(li_run_args, logits_len), sizeof(int), NULL,
     "LMAX, the columns of the logits output (every score, -Inf past the visible keys); 0: no logits", false},
};

static dsops_status li_init(void *args, dsops_preset preset)
{
    li_run_args *w = args;
    w->topk = 0;
    w->logits_len = 0;
    return dsops_lightning_indexer_init(&w->op, preset);
}

static dsops_status li_output_shapes(void *args, char *msg, size_t len)
{
    li_run_args *w = args;
    if (w->topk < 1) {
        snprintf(msg, len, "topk = %d: the top-k width must be >= 1", w->topk);
        return DSOPS_ERR_PARAM;
    }
    if (w->topk > LI_TOPK_MAX) {
        snprintf(msg, len, "topk = %d exceeds the library's limit %d", w->topk, LI_TOPK_MAX);
        return DSOPS_ERR_UNSUPPORTED;
    }
    if (w->op.q_idx.ndim != 3) {
        snprintf(msg, len, "q_idx has rank %d, expected 3 ([T, NI, DI])", w->op.q_idx.ndim);
        return DSOPS_ERR_SHAPE;
    }
    int64_t tk[2] = {w->op.q_idx.shape[0], w->topk};
    w->op.topk_indices = dsops_tensor_make(NULL, DSOPS_INT32, 2, tk);
    w->op.topk_scores = dsops_tensor_make(NULL, DSOPS_FP32, 2, tk);
    if (w->logits_len < 0) {
        snprintf(msg, len, "logits_len = %d, expected >= 0", w->logits_len);
        return DSOPS_ERR_PARAM;
    }
    if (w->logits_len > 0)
        w->op.logits = dsops_tensor_make(NULL, DSOPS_FP32, 2, (int64_t[]){w->op.q_idx.shape[0], w->logits_len});
    return DSOPS_OK;
}

static dsops_status li_call(dsops_context *ctx, const void *args)
{
    const li_run_args *w = args;
    return dsops_lightning_indexer(ctx, &w->op);
}

/* ---- shared primitives (spec §2.3 - §2.8) ---------------------------------------------------- */

/* rmsnorm */
typedef dsops_rmsnorm_args rms_args;

static const dsops_tensor_desc rms_tensors[] = {
    RUN_TENSOR(rms_args, x, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, W]"),
    RUN_TENSOR(rms_args, weight, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[W]"),
    RUN_TENSOR(rms_args, y, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, W]"),
};

static const dsops_param_desc rms_params[] = {
    RUN_PARAM(rms_args, eps, DSOPS_PARAM_FLOAT, NULL, "default 1e-6"),
};

static dsops_status rms_init(void *args, dsops_preset preset) { return dsops_rmsnorm_init(args, preset); }

static dsops_status rms_output_shapes(void *args, char *msg, size_t len)
{
    rms_args *a = args;
    if (a->x.ndim != 2) {
        snprintf(msg, len, "x has rank %d, expected 2 ([T, W])", a->x.ndim);
        return DSOPS_ERR_SHAPE;
    }
    a->y = dsops_tensor_make(NULL, DSOPS_BF16, 2, a->x.shape);
    return DSOPS_OK;
}

static dsops_status rms_call(dsops_context *ctx, const void *args)
{
    return dsops_rmsnorm(ctx, args);
}

/* rope_tables: the dtype of the tables is not given by any input, so the tool keeps it next to the
 * operator's arguments as the parameter `dtype` (default fp32). */
typedef struct rt_run_args {
    dsops_rope_tables_args op;
    int dtype;
} rt_run_args;

#define RT_TENSOR(field, dir, dtypes, note) {#field, offsetof(rt_run_args, op.field), dir, dtypes, note}
#define RT_PARAM(field, kind, spellings, note) \
    {#field, kind, offsetof(rt_run_args, op.field), sizeof(((rt_run_args *)0)->op.field), spellings, note, false}

static const dsops_enum_value run_rope_layouts[] = {{"pairs", DSOPS_ROPE_PAIRS}, {"halves", DSOPS_ROPE_HALVES}, {NULL, 0}};
static const dsops_enum_value run_table_dtypes[] = {{"fp32", DSOPS_FP32}, {"bf16", DSOPS_BF16}, {NULL, 0}};

static const dsops_tensor_desc rt_tensors[] = {
    RT_TENSOR(positions, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT64), "[T], 0 <= p < 2^31"),
    RT_TENSOR(cos, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_FP32) | DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, 64], dtype given by the parameter dtype"),
    RT_TENSOR(sin, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_FP32) | DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, 64], dtype given by the parameter dtype"),
};

static const dsops_param_desc rt_params[] = {
    RT_PARAM(base, DSOPS_PARAM_DOUBLE, NULL, "theta; preset v32: 10000, v4_flash / v4_pro: 160000"),
    RT_PARAM(yarn, DSOPS_PARAM_BOOL, NULL, "apply the YaRN correction (presets: true)"),
    RT_PARAM(yarn_factor, DSOPS_PARAM_DOUBLE, NULL, "v32: 40, v4: 16"),
    RT_PARAM(yarn_original_len, DSOPS_PARAM_DOUBLE, NULL, "v32: 4096, v4: 65536"),
    RT_PARAM(yarn_beta_fast, DSOPS_PARAM_DOUBLE, NULL, "32"),
    RT_PARAM(yarn_beta_slow, DSOPS_PARAM_DOUBLE, NULL, "1"),
    RT_PARAM(layout, DSOPS_PARAM_ENUM, run_rope_layouts, "v32: halves, v4: pairs"),
    {"dtype", DSOPS_PARAM_ENUM, offsetof(rt_run_args, dtype), sizeof(int), run_table_dtypes, "dtype of cos and sin (default fp32)",
     false},
};

static dsops_status rt_init(void *args, dsops_preset preset)
{
    rt_run_args *w = args;
    w->dtype = DSOPS_FP32;
    return dsops_rope_tables_init(&w->op, preset);
}

static dsops_status rt_output_shapes(void *args, char *msg, size_t len)
{
    rt_run_args *w = args;
    if (w->op.positions.ndim != 1) {
        snprintf(msg, len, "positions has rank %d, expected 1 ([T])", w->op.positions.ndim);
        return DSOPS_ERR_SHAPE;
    }
    int64_t shape[2] = {w->op.positions.shape[0], 64};
    w->op.cos = dsops_tensor_make(NULL, (dsops_dtype)w->dtype, 2, shape);
    w->op.sin = dsops_tensor_make(NULL, (dsops_dtype)w->dtype, 2, shape);
    return DSOPS_OK;
}

static dsops_status rt_call(dsops_context *ctx, const void *args)
{
    const rt_run_args *w = args;
    return dsops_rope_tables(ctx, &w->op);
}

/* rope_apply */
typedef dsops_rope_apply_args ra_args;

static const dsops_enum_value run_rope_modes[] = {{"interleaved", DSOPS_ROPE_INTERLEAVED},
                                                {"half", DSOPS_ROPE_HALF},
                                                {"interleaved_in_half_out", DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT},
                                                {NULL, 0}};

static const dsops_tensor_desc ra_tensors[] = {
    RUN_TENSOR(ra_args, x, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, N, W]"),
    RUN_TENSOR(ra_args, rope_cos, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64]"),
    RUN_TENSOR(ra_args, rope_sin, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64]"),
    RUN_TENSOR(ra_args, y, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, N, W]"),
};

static const dsops_param_desc ra_params[] = {
    RUN_PARAM(ra_args, rope_offset, DSOPS_PARAM_INT, NULL, "0 ... W - 64 (default 0; V4 output de-rotation: 448)"),
    RUN_PARAM(ra_args, rope_mode, DSOPS_PARAM_ENUM, run_rope_modes, "default interleaved"),
    RUN_PARAM(ra_args, rope_inverse, DSOPS_PARAM_BOOL, NULL, "default false"),
};

static dsops_status ra_init(void *args, dsops_preset preset)
{
    (void)preset; /* no preset-dependent parameter */
    memset(args, 0, sizeof(ra_args));
    return DSOPS_OK;
}

static dsops_status ra_output_shapes(void *args, char *msg, size_t len)
{
    ra_args *a = args;
    if (a->x.ndim != 3) {
        snprintf(msg, len, "x has rank %d, expected 3 ([T, N, W])", a->x.ndim);
        return DSOPS_ERR_SHAPE;
    }
    a->y = dsops_tensor_make(NULL, DSOPS_BF16, 3, a->x.shape);
    return DSOPS_OK;
}

static dsops_status ra_call(dsops_context *ctx, const void *args)
{
    return dsops_rope_apply(ctx, args);
}

/* quant_q8: group defaults to W (one group per row) */
typedef dsops_quant_q8_args qa_args;

static const dsops_tensor_desc qa_tensors[] = {
    RUN_TENSOR(qa_args, x, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[R, W]"),
    RUN_TENSOR(qa_args, q, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_INT8), "[R, W]"),
    RUN_TENSOR(qa_args, scale, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[R, W / group]"),
};

static const dsops_param_desc qa_params[] = {
    RUN_PARAM(qa_args, group, DSOPS_PARAM_INT, NULL, "G, W % G == 0 (default W)"),
};

static dsops_status qa_init(void *args, dsops_preset preset)
{
    (void)preset;
    memset(args, 0, sizeof(qa_args));
    return DSOPS_OK;
}

static void qa_infer(void *args, const bool *given)
{
    qa_args *a = args;
    if (!given[0] && a->x.ndim == 2 && a->x.shape[1] >= 1 && a->x.shape[1] <= INT_MAX)
        a->group = (int)a->x.shape[1];
}

static dsops_status qa_output_shapes(void *args, char *msg, size_t len)
{
    qa_args *a = args;
    if (a->x.ndim != 2) {
        snprintf(msg, len, "x has rank %d, expected 2 ([R, W])", a->x.ndim);
        return DSOPS_ERR_SHAPE;
    }
    if (a->group < 1) {
        snprintf(msg, len, "group = %d, expected >= 1", a->group);
        return DSOPS_ERR_PARAM;
    }
    if (a->x.shape[1] % a->group != 0) {
        snprintf(msg, len, "group = %d does not divide W = %lld", a->group, (long long)a->x.shape[1]);
        return DSOPS_ERR_PARAM;
    }
    int64_t sshape[2] = {a->x.shape[0], a->x.shape[1] / a->group};
    a->q = dsops_tensor_make(NULL, DSOPS_INT8, 2, a->x.shape);
    a->scale = dsops_tensor_make(NULL, DSOPS_FP32, 2, sshape);
    return DSOPS_OK;
}

static dsops_status qa_call(dsops_context *ctx, const void *args)
{
    return dsops_quant_q8(ctx, args);
}

/* cache_store: the caches are in-out, written to OUT after the call */
typedef dsops_cache_store_args cst_args;

static const dsops_tensor_desc cst_tensors[] = {
    RUN_TENSOR(cst_args, src, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, W]"),
    RUN_TENSOR(cst_args, cache_index, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT64), "[T], global slots, < 0: not stored"),
    RUN_TENSOR(cst_args, cache, DSOPS_ARG_INOUT,
               DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8) | DSOPS_DTYPE_BIT(DSOPS_UINT8),
               "[NB, BS, W]; uint8: FlashMLA FP8 rows [NB, BS, 656] (W 576)"),
    RUN_TENSOR(cst_args, cache_scale, DSOPS_ARG_INOUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32) | DSOPS_DTYPE_BIT(DSOPS_FP16),
               "[NB, BS, W / group] or [NB, BS] (group = W), int8 cache"),
};

static const dsops_param_desc cst_params[] = {
    RUN_PARAM(cst_args, group, DSOPS_PARAM_INT, NULL, "Q8 group of an int8 cache (default 0 = W)"),
};

static dsops_status cst_init(void *args, dsops_preset preset)
{
    (void)preset;
    memset(args, 0, sizeof(cst_args));
    return DSOPS_OK;
}

static dsops_status cst_output_shapes(void *args, char *msg, size_t len)
{
    (void)args, (void)msg, (void)len; /* no outputs besides the in-out caches */
    return DSOPS_OK;
}

static dsops_status cst_call(dsops_context *ctx, const void *args)
{
    return dsops_cache_store(ctx, args);
}

/* nd_to_fractal_nz / fractal_nz_to_nd (spec §2.11). NZ pads R and C, so the way back takes them as the
 * required parameters `rows` and `cols` next to the arguments (the first member, as for lightning_indexer). */
typedef struct nz_run_args {
    dsops_fractal_nz_args op;
    int64_t rows, cols; /* fractal_nz_to_nd: R and C of nd; -1 until given */
} nz_run_args;

#define NZ_TENSOR(field, dir, note) {#field, offsetof(nz_run_args, op.field), dir, NZ_DTYPES, note}
#define NZ_DTYPES                                                                                                 \
    (DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP16) | DSOPS_DTYPE_BIT(DSOPS_FP32) |                     \
     DSOPS_DTYPE_BIT(DSOPS_INT8) | DSOPS_DTYPE_BIT(DSOPS_INT32) | DSOPS_DTYPE_BIT(DSOPS_INT64) |                   \
     DSOPS_DTYPE_BIT(DSOPS_UINT8))
#define NZ_SHAPE "[..., ceil(C / C0), ceil(R / 16) * 16, C0], C0 = 32 bytes / element"

static const dsops_tensor_desc to_nz_tensors[] = {
    NZ_TENSOR(nd, DSOPS_ARG_IN, "[..., R, C]"),
    NZ_TENSOR(nz, DSOPS_ARG_OUT, NZ_SHAPE),
};

static const dsops_tensor_desc to_nd_tensors[] = {
    NZ_TENSOR(nz, DSOPS_ARG_IN, NZ_SHAPE),
    NZ_TENSOR(nd, DSOPS_ARG_OUT, "[..., rows, cols]"),
};

static const dsops_param_desc to_nd_params[] = {
    {"rows", DSOPS_PARAM_INT, offsetof(nz_run_args, rows), sizeof(int64_t), NULL, "R of nd (NZ rounds it up to 16)",
     true},
    {"cols", DSOPS_PARAM_INT, offsetof(nz_run_args, cols), sizeof(int64_t), NULL, "C of nd (NZ rounds it up to C0)",
     true},
};

static dsops_status nz_init(void *args, dsops_preset preset)
{
    (void)preset;
    nz_run_args *w = args;
    memset(w, 0, sizeof *w);
    w->rows = w->cols = -1;
    return DSOPS_OK;
}

static dsops_status nz_dtype_known(const dsops_tensor *t, const char *name, char *msg, size_t len)
{
    if (dsops_dtype_size(t->dtype) != 0)
        return DSOPS_OK;
    snprintf(msg, len, "%s has no dtype", name);
    return DSOPS_ERR_DTYPE;
}

static dsops_status to_nz_output_shapes(void *args, char *msg, size_t len)
{
    nz_run_args *w = args;
    const dsops_tensor *nd = &w->op.nd;
    if (nd->ndim < 2 || nd->ndim > DSOPS_MAX_DIMS - 1) {
        snprintf(msg, len, "nd has rank %d, expected 2 ... %d", nd->ndim, DSOPS_MAX_DIMS - 1);
        return DSOPS_ERR_SHAPE;
    }
    dsops_status s = nz_dtype_known(nd, "nd", msg, len);
    if (s != DSOPS_OK)
        return s;
    int b = nd->ndim - 2;
    int64_t shape[DSOPS_MAX_DIMS], C0 = 32 / (int64_t)dsops_dtype_size(nd->dtype);
    memcpy(shape, nd->shape, sizeof(int64_t) * (size_t)b);
    for (int d = b; d < b + 2; d++)
        if (nd->shape[d] < 0 || nd->shape[d] > INT64_MAX / 8) { /* nd is not validated yet: keep the rounding exact */
            snprintf(msg, len, "nd.shape[%d] = %lld, expected 0 ... 2^60", d, (long long)nd->shape[d]);
            return DSOPS_ERR_SHAPE;
        }
    shape[b] = (nd->shape[b + 1] + C0 - 1) / C0;
    shape[b + 1] = (nd->shape[b] + 15) / 16 * 16;
    shape[b + 2] = C0;
    w->op.nz = dsops_tensor_make(NULL, nd->dtype, nd->ndim + 1, shape);
    return DSOPS_OK;
}

static dsops_status to_nd_output_shapes(void *args, char *msg, size_t len)
{
    nz_run_args *w = args;
    const dsops_tensor *nz = &w->op.nz;
    if (w->rows < 0 || w->cols < 0) {
        snprintf(msg, len, "rows = %lld, cols = %lld: both are required (>= 0)", (long long)w->rows,
                 (long long)w->cols);
        return DSOPS_ERR_PARAM;
    }
    if (nz->ndim < 3 || nz->ndim > DSOPS_MAX_DIMS) {
        snprintf(msg, len, "nz has rank %d, expected 3 ... %d", nz->ndim, DSOPS_MAX_DIMS);
        return DSOPS_ERR_SHAPE;
    }
    dsops_status s = nz_dtype_known(nz, "nz", msg, len);
    if (s != DSOPS_OK)
        return s;
    int64_t shape[DSOPS_MAX_DIMS];
    memcpy(shape, nz->shape, sizeof(int64_t) * (size_t)(nz->ndim - 3));
    shape[nz->ndim - 3] = w->rows;
    shape[nz->ndim - 2] = w->cols;
    w->op.nd = dsops_tensor_make(NULL, nz->dtype, nz->ndim - 1, shape);
    return DSOPS_OK;
}

static dsops_status to_nz_call(dsops_context *ctx, const void *args)
{
    return dsops_nd_to_fractal_nz(ctx, &((const nz_run_args *)args)->op);
}

static dsops_status to_nd_call(dsops_context *ctx, const void *args)
{
    return dsops_fractal_nz_to_nd(ctx, &((const nz_run_args *)args)->op);
}

/* fp8_cache_quantize / fp8_cache_dequantize (spec §2.12). A MODEL1 cache [NB, BB] does not give BS back, so the
 * way back takes it as the parameter `block_size` (required for MODEL1; a V32 cache has it as shape[1]). */
typedef struct fp8c_run_args {
    dsops_fp8_cache_args op;
    int64_t block_size; /* fp8_cache_dequantize of a MODEL1 cache: BS; -1 until given */
} fp8c_run_args;

static const dsops_enum_value run_fp8_layouts[] = {
    {"v32", DSOPS_FP8_CACHE_V32}, {"model1", DSOPS_FP8_CACHE_MODEL1}, {NULL, 0}};

#define FP8C_KV(dir) {"kv", offsetof(fp8c_run_args, op.kv), dir, DSOPS_DTYPE_BIT(DSOPS_BF16), "[NB, BS, D], D 576 (v32) or 512 (model1)"}
#define FP8C_CACHE(dir)                                                                                          \
    {"cache", offsetof(fp8c_run_args, op.cache), dir, DSOPS_DTYPE_BIT(DSOPS_UINT8),                              \
     "v32: [NB, BS, 656]; model1: [NB, BB], BB = BS * 584 rounded up to 576"}

static const dsops_tensor_desc fp8q_tensors[] = {FP8C_KV(DSOPS_ARG_IN), FP8C_CACHE(DSOPS_ARG_OUT)};
static const dsops_tensor_desc fp8d_tensors[] = {FP8C_CACHE(DSOPS_ARG_IN), FP8C_KV(DSOPS_ARG_OUT)};

static const dsops_param_desc fp8q_params[] = {
    {"layout", DSOPS_PARAM_ENUM, offsetof(fp8c_run_args, op.layout), sizeof(dsops_fp8_cache_layout), run_fp8_layouts,
     "FlashMLA's V32_FP8Sparse (v32, default) or MODEL1_FP8Sparse (model1)", false},
};
static const dsops_param_desc fp8d_params[] = {
    {"layout", DSOPS_PARAM_ENUM, offsetof(fp8c_run_args, op.layout), sizeof(dsops_fp8_cache_layout), run_fp8_layouts,
     "FlashMLA's V32_FP8Sparse (v32, default) or MODEL1_FP8Sparse (model1)", false},
    {"block_size", DSOPS_PARAM_INT, offsetof(fp8c_run_args, block_size), sizeof(int64_t), NULL,
     "BS of a model1 cache (required there)", false},
};

static dsops_status fp8c_init(void *args, dsops_preset preset)
{
    (void)preset;
    fp8c_run_args *w = args;
    memset(w, 0, sizeof *w);
    w->op.layout = DSOPS_FP8_CACHE_V32;
    w->block_size = -1;
    return DSOPS_OK;
}

static dsops_status fp8q_output_shapes(void *args, char *msg, size_t len)
{
    fp8c_run_args *w = args;
    const dsops_tensor *kv = &w->op.kv;
    if (kv->ndim != 3) {
        snprintf(msg, len, "kv has rank %d, expected 3 ([NB, BS, D])", kv->ndim);
        return DSOPS_ERR_SHAPE;
    }
    const int64_t NB = kv->shape[0], BS = kv->shape[1];
    if (w->op.layout == DSOPS_FP8_CACHE_V32)
        w->op.cache = dsops_tensor_make(NULL, DSOPS_UINT8, 3, (int64_t[]){NB, BS, 656});
    else
        w->op.cache = dsops_tensor_make(NULL, DSOPS_UINT8, 2, (int64_t[]){NB, (BS * 584 + 575) / 576 * 576});
    return DSOPS_OK;
}

static dsops_status fp8d_output_shapes(void *args, char *msg, size_t len)
{
    fp8c_run_args *w = args;
    const dsops_tensor *c = &w->op.cache;
    const bool v32 = w->op.layout == DSOPS_FP8_CACHE_V32;
    if (c->ndim != (v32 ? 3 : 2)) {
        snprintf(msg, len, "cache has rank %d, expected %s", c->ndim, v32 ? "3 ([NB, BS, 656])" : "2 ([NB, BB])");
        return DSOPS_ERR_SHAPE;
    }
    if (!v32 && w->block_size < 0) {
        snprintf(msg, len, "block_size = %lld: a model1 cache needs it (>= 0)", (long long)w->block_size);
        return DSOPS_ERR_PARAM;
    }
    const int64_t BS = v32 ? c->shape[1] : w->block_size;
    w->op.kv = dsops_tensor_make(NULL, DSOPS_BF16, 3, (int64_t[]){c->shape[0], BS, v32 ? 576 : 512});
    return DSOPS_OK;
}

static dsops_status fp8q_call(dsops_context *ctx, const void *args)
{
    return dsops_fp8_cache_quantize(ctx, &((const fp8c_run_args *)args)->op);
}

static dsops_status fp8d_call(dsops_context *ctx, const void *args)
{
    return dsops_fp8_cache_dequantize(ctx, &((const fp8c_run_args *)args)->op);
}

/* ---- sparse_attention_v32 (the fused V3.2 layer) ------------------------------------------------- */

/* The caches are in-out: read from IN, updated by the call and written to OUT. The top-k width is the
 * operator's own parameter `topk` (default 2048), which also sizes topk_indices. */
typedef dsops_sparse_attention_v32_args dia_args;

#define DIA_TOPK_MAX (1 << 24) /* the library's limit on K */

static const dsops_tensor_desc dia_tensors[] = {
    RUN_TENSOR(dia_args, x, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, H]"),
    RUN_TENSOR(dia_args, cu_seqlens_q, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B+1]"),
    RUN_TENSOR(dia_args, seqused_kv, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B], the call's tokens included"),
    RUN_TENSOR(dia_args, block_table, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B, MB], shared by every cache"),
    RUN_TENSOR(dia_args, cache_index, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT64), "[T], slot(b, p_t); < 0: not stored"),
    RUN_TENSOR(dia_args, rope_cos, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64], halves tables"),
    RUN_TENSOR(dia_args, rope_sin, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64]"),
    RUN_TENSOR(dia_args, wq_a, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[Q, H]"),
    RUN_TENSOR(dia_args, gamma_cq, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[Q]"),
    RUN_TENSOR(dia_args, wq_b, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8),
               "[N*(Dqn+64), Q] (I8: int8 variant)"),
    RUN_TENSOR(dia_args, wq_b_scale, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[N*(Dqn+64)], int8 variant"),
    RUN_TENSOR(dia_args, w_uk, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[N, Dqn, Dc]"),
    RUN_TENSOR(dia_args, wkv_a, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[Dc+64, H]"),
    RUN_TENSOR(dia_args, gamma_ckv, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[Dc]"),
    RUN_TENSOR(dia_args, idx_wq_b, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8), "[NI*DI, Q], dtype of wq_b"),
    RUN_TENSOR(dia_args, idx_wq_b_scale, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[NI*DI], int8 variant"),
    RUN_TENSOR(dia_args, idx_wk, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[DI, H]"),
    RUN_TENSOR(dia_args, weights_proj, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[NI, H]"),
    RUN_TENSOR(dia_args, ln_gamma_k, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[DI]"),
    RUN_TENSOR(dia_args, ln_beta_k, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[DI]"),
    RUN_TENSOR(dia_args, hadamard_q, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32),
               "[DI, DI] (int8 variant: required)"),
    RUN_TENSOR(dia_args, hadamard_k, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32),
               "[DI, DI] (int8 variant: required)"),
    RUN_TENSOR(dia_args, kv_cache, DSOPS_ARG_INOUT_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8),
               "[NB, BS, Dc], split layouts (I8: split_int8)"),
    RUN_TENSOR(dia_args, kv_scale_cache, DSOPS_ARG_INOUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[NB, BS, Dc/128], split_int8"),
    RUN_TENSOR(dia_args, kr_cache, DSOPS_ARG_INOUT_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[NB, BS, 64], split layouts"),
    RUN_TENSOR(dia_args, kv_packed, DSOPS_ARG_INOUT_OPT, DSOPS_DTYPE_BIT(DSOPS_UINT8), "[NB, BS, 656], packed_int8 or flashmla_fp8"),
    RUN_TENSOR(dia_args, idx_k_cache, DSOPS_ARG_INOUT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8),
               "[NB, BS, DI], dtype of idx_wq_b"),
    RUN_TENSOR(dia_args, idx_k_scale_cache, DSOPS_ARG_INOUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP16), "[NB, BS], int8 variant"),
    RUN_TENSOR(dia_args, out, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, N, Dc]"),
    RUN_TENSOR(dia_args, topk_indices, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_INT32), "[T, topk]"),
    RUN_TENSOR(dia_args, lse, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, N]"),
};

static const dsops_param_desc dia_params[] = {
    RUN_PARAM(dia_args, mla_eps_cq, DSOPS_PARAM_FLOAT, NULL, "default 1e-6 (vendor 1e-5)"),
    RUN_PARAM(dia_args, mla_eps_ckv, DSOPS_PARAM_FLOAT, NULL, "default 1e-6 (vendor 1e-5)"),
    RUN_PARAM(dia_args, mla_rope_mode, DSOPS_PARAM_ENUM, run_rope_modes, "default interleaved_in_half_out"),
    RUN_PARAM(dia_args, mla_rope_inverse, DSOPS_PARAM_BOOL, NULL, "default false"),
    RUN_PARAM(dia_args, idx_ln_eps, DSOPS_PARAM_FLOAT, NULL, "default 1e-6"),
    RUN_PARAM(dia_args, idx_rope_mode, DSOPS_PARAM_ENUM, run_rope_modes, "default half (vendor DIA: interleaved_in_half_out)"),
    RUN_PARAM(dia_args, idx_rope_inverse, DSOPS_PARAM_BOOL, NULL, "default false"),
    RUN_PARAM(dia_args, weights_scale, DSOPS_PARAM_FLOAT, NULL, "default 1/sqrt(64*128) (vendor DIA: 1)"),
    RUN_PARAM(dia_args, softmax_scale, DSOPS_PARAM_FLOAT, NULL, "default V3.2 (vendor 576^-0.5)"),
    RUN_PARAM(dia_args, p_mode, DSOPS_PARAM_ENUM, run_p_modes, "default normalised (vendor DIA golden: fp32)"),
    RUN_PARAM(dia_args, p_tile, DSOPS_PARAM_INT, NULL, "tile length of p_mode=tiled"),
    RUN_PARAM(dia_args, kv_layout, DSOPS_PARAM_ENUM, run_kv_layouts,
              "default: packed_int8 if kv_packed is given (flashmla_fp8 must be named), split_int8 if kv_cache is I8, else split_bf16"),
    RUN_PARAM(dia_args, topk, DSOPS_PARAM_INT, NULL, "K, the top-k width (default 2048; sizes topk_indices)"),
};
enum { DIA_PARAM_KV_LAYOUT = 11 };

static dsops_status dia_init(void *args, dsops_preset preset) { return dsops_sparse_attention_v32_init(args, preset); }

static void dia_infer(void *args, const bool *given)
{
    dia_args *a = args;
    if (!given[DIA_PARAM_KV_LAYOUT]) {
        if (a->kv_packed.data != NULL)
            a->kv_layout = DSOPS_KV_PACKED_INT8;
        else if (a->kv_cache.data != NULL && a->kv_cache.dtype == DSOPS_INT8)
            a->kv_layout = DSOPS_KV_SPLIT_INT8;
        else
            a->kv_layout = DSOPS_KV_SPLIT_BF16;
    }
}

static dsops_status dia_output_shapes(void *args, char *msg, size_t len)
{
    dia_args *a = args;
    if (a->topk < 1) {
        snprintf(msg, len, "topk = %d: the top-k width must be >= 1", a->topk);
        return DSOPS_ERR_PARAM;
    }
    if (a->topk > DIA_TOPK_MAX) {
        snprintf(msg, len, "topk = %d exceeds the library's limit %d", a->topk, DIA_TOPK_MAX);
        return DSOPS_ERR_UNSUPPORTED;
    }
    if (a->x.ndim != 2 || a->w_uk.ndim != 3) {
        snprintf(msg, len, "x has rank %d and w_uk rank %d, expected 2 ([T, H]) and 3 ([N, Dqn, Dc])", a->x.ndim,
                 a->w_uk.ndim);
        return DSOPS_ERR_SHAPE;
    }
    int64_t tnd[3] = {a->x.shape[0], a->w_uk.shape[0], a->w_uk.shape[2]}, tk[2] = {a->x.shape[0], a->topk};
    a->out = dsops_tensor_make(NULL, DSOPS_BF16, 3, tnd);
    a->lse = dsops_tensor_make(NULL, DSOPS_FP32, 2, tnd);
    a->topk_indices = dsops_tensor_make(NULL, DSOPS_INT32, 2, tk);
    return DSOPS_OK;
}

static dsops_status dia_call(dsops_context *ctx, const void *args)
{
    return dsops_sparse_attention_v32(ctx, args);
}

/* ---- mla_prolog_v32 ----------------------------------------------------------------------------- */

/* The kv caches of the chosen layout are in-out: read from IN, updated at cache_index and written to OUT.
 * qr_scale exists only with int8 wq_b: it is produced (and written to OUT) only then. */
typedef dsops_mla_prolog_v32_args mlap_args;

static const dsops_tensor_desc mlap_tensors[] = {
    RUN_TENSOR(mlap_args, x, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, H]"),
    RUN_TENSOR(mlap_args, wq_a, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[Q, H]"),
    RUN_TENSOR(mlap_args, gamma_cq, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[Q]"),
    RUN_TENSOR(mlap_args, wq_b, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8), "[N*(Dqn+64), Q] (I8: int8 qr)"),
    RUN_TENSOR(mlap_args, wq_b_scale, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[N*(Dqn+64)], int8 wq_b"),
    RUN_TENSOR(mlap_args, w_uk, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[N, Dqn, Dc]"),
    RUN_TENSOR(mlap_args, wkv_a, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[Dc+64, H]"),
    RUN_TENSOR(mlap_args, gamma_ckv, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[Dc]"),
    RUN_TENSOR(mlap_args, rope_cos, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64], halves tables"),
    RUN_TENSOR(mlap_args, rope_sin, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64]"),
    RUN_TENSOR(mlap_args, cache_index, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT64), "[T], global cache rows; < 0: not stored"),
    RUN_TENSOR(mlap_args, kv_cache, DSOPS_ARG_INOUT_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8),
               "[NB, BS, Dc], split layouts (I8: split_int8)"),
    RUN_TENSOR(mlap_args, kv_scale_cache, DSOPS_ARG_INOUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[NB, BS, Dc/128], split_int8"),
    RUN_TENSOR(mlap_args, kr_cache, DSOPS_ARG_INOUT_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[NB, BS, 64], split layouts"),
    RUN_TENSOR(mlap_args, kv_packed, DSOPS_ARG_INOUT_OPT, DSOPS_DTYPE_BIT(DSOPS_UINT8), "[NB, BS, 656], packed_int8 or flashmla_fp8"),
    RUN_TENSOR(mlap_args, q_nope, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, N, Dc]"),
    RUN_TENSOR(mlap_args, q_rope, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, N, 64]"),
    RUN_TENSOR(mlap_args, qr, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8), "[T, Q], dtype of wq_b"),
    RUN_TENSOR(mlap_args, qr_scale, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32),
               "[T], int8 wq_b only (not in OUT with bf16 wq_b)"),
};

static const dsops_param_desc mlap_params[] = {
    RUN_PARAM(mlap_args, eps_cq, DSOPS_PARAM_FLOAT, NULL, "default 1e-6 (vendor 1e-5)"),
    RUN_PARAM(mlap_args, eps_ckv, DSOPS_PARAM_FLOAT, NULL, "default 1e-6 (vendor 1e-5)"),
    RUN_PARAM(mlap_args, rope_mode, DSOPS_PARAM_ENUM, run_rope_modes, "default interleaved_in_half_out"),
    RUN_PARAM(mlap_args, rope_inverse, DSOPS_PARAM_BOOL, NULL, "default false"),
    RUN_PARAM(mlap_args, kv_layout, DSOPS_PARAM_ENUM, run_kv_layouts,
              "default: packed_int8 if kv_packed is given (flashmla_fp8 must be named), split_int8 if kv_cache is I8, else split_bf16"),
};
enum { MLAP_PARAM_KV_LAYOUT = 4 };

static dsops_status mlap_init(void *args, dsops_preset preset) { return dsops_mla_prolog_v32_init(args, preset); }

static void mlap_infer(void *args, const bool *given)
{
    mlap_args *a = args;
    if (!given[MLAP_PARAM_KV_LAYOUT]) {
        if (a->kv_packed.data != NULL)
            a->kv_layout = DSOPS_KV_PACKED_INT8;
        else if (a->kv_cache.data != NULL && a->kv_cache.dtype == DSOPS_INT8)
            a->kv_layout = DSOPS_KV_SPLIT_INT8;
        else
            a->kv_layout = DSOPS_KV_SPLIT_BF16;
    }
}

static dsops_status mlap_output_shapes(void *args, char *msg, size_t len)
{
    mlap_args *a = args;
    if (a->x.ndim != 2 || a->wq_a.ndim != 2 || a->w_uk.ndim != 3) {
        snprintf(msg, len, "x, wq_a and w_uk have ranks %d, %d and %d, expected 2 ([T, H]), 2 ([Q, H]) and 3 ([N, Dqn, Dc])",
                 a->x.ndim, a->wq_a.ndim, a->w_uk.ndim);
        return DSOPS_ERR_SHAPE;
    }
    const int64_t T = a->x.shape[0], N = a->w_uk.shape[0], Dc = a->w_uk.shape[2], Q = a->wq_a.shape[0];
    const bool int8w = a->wq_b.dtype == DSOPS_INT8;
    int64_t tnd[3] = {T, N, Dc}, tnr[3] = {T, N, 64}, tq[2] = {T, Q}, t1[1] = {T};
    a->q_nope = dsops_tensor_make(NULL, DSOPS_BF16, 3, tnd);
    a->q_rope = dsops_tensor_make(NULL, DSOPS_BF16, 3, tnr);
    a->qr = dsops_tensor_make(NULL, int8w ? DSOPS_INT8 : DSOPS_BF16, 2, tq);
    if (int8w)
        a->qr_scale = dsops_tensor_make(NULL, DSOPS_FP32, 1, t1);
    else
        memset(&a->qr_scale, 0, sizeof a->qr_scale); /* not an output of the bf16 variant */
    return DSOPS_OK;
}

static dsops_status mlap_call(dsops_context *ctx, const void *args)
{
    return dsops_mla_prolog_v32(ctx, args);
}

/* ---- indexer_prolog_v32 ------------------------------------------------------------------------- */

/* The indexer key cache (and its scales, int8) is in-out. The variant follows idx_wq_b: q_idx_scale
 * exists only in the int8 variant and is produced (and written to OUT) only then. */
typedef dsops_indexer_prolog_v32_args idxp_args;

static const dsops_tensor_desc idxp_tensors[] = {
    RUN_TENSOR(idxp_args, x, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, H]"),
    RUN_TENSOR(idxp_args, qr, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8), "[T, Q], dtype of idx_wq_b"),
    RUN_TENSOR(idxp_args, qr_scale, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T], int8 variant"),
    RUN_TENSOR(idxp_args, idx_wq_b, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8), "[NI*DI, Q] (I8: int8 variant)"),
    RUN_TENSOR(idxp_args, idx_wq_b_scale, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[NI*DI], int8 variant"),
    RUN_TENSOR(idxp_args, idx_wk, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[DI, H]"),
    RUN_TENSOR(idxp_args, weights_proj, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[NI, H]"),
    RUN_TENSOR(idxp_args, ln_gamma_k, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[DI]"),
    RUN_TENSOR(idxp_args, ln_beta_k, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[DI]"),
    RUN_TENSOR(idxp_args, rope_cos, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64], halves tables"),
    RUN_TENSOR(idxp_args, rope_sin, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64]"),
    RUN_TENSOR(idxp_args, hadamard_q, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32),
               "[DI, DI] (int8 variant: required; bf16: absent = no rotation)"),
    RUN_TENSOR(idxp_args, hadamard_k, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32),
               "[DI, DI] (int8 variant: required; bf16: absent = no rotation)"),
    RUN_TENSOR(idxp_args, cache_index, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT64), "[T], global cache rows; < 0: not stored"),
    RUN_TENSOR(idxp_args, idx_k_cache, DSOPS_ARG_INOUT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8),
               "[NB, BS, DI], dtype of idx_wq_b"),
    RUN_TENSOR(idxp_args, idx_k_scale_cache, DSOPS_ARG_INOUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP16), "[NB, BS], int8 variant"),
    RUN_TENSOR(idxp_args, q_idx, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8), "[T, NI, DI], dtype of idx_wq_b"),
    RUN_TENSOR(idxp_args, q_idx_scale, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP16),
               "[T, NI], int8 variant only (not in OUT for bf16)"),
    RUN_TENSOR(idxp_args, weights, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_FP16) | DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, NI] (F16: int8, BF16: bf16)"),
};

static const dsops_param_desc idxp_params[] = {
    RUN_PARAM(idxp_args, ln_eps, DSOPS_PARAM_FLOAT, NULL, "default 1e-6"),
    RUN_PARAM(idxp_args, weights_scale, DSOPS_PARAM_FLOAT, NULL, "default 1/sqrt(64*128) (vendor DIA: 1)"),
    RUN_PARAM(idxp_args, rope_mode, DSOPS_PARAM_ENUM, run_rope_modes, "default half (vendor CRI / DIA: interleaved_in_half_out)"),
    RUN_PARAM(idxp_args, rope_inverse, DSOPS_PARAM_BOOL, NULL, "default false"),
};

static dsops_status idxp_init(void *args, dsops_preset preset) { return dsops_indexer_prolog_v32_init(args, preset); }

static dsops_status idxp_output_shapes(void *args, char *msg, size_t len)
{
    idxp_args *a = args;
    if (a->x.ndim != 2 || a->idx_wq_b.ndim != 2 || a->idx_wk.ndim != 2) {
        snprintf(msg, len, "x, idx_wq_b and idx_wk have ranks %d, %d and %d, expected 2 ([T, H], [NI*DI, Q], [DI, H])",
                 a->x.ndim, a->idx_wq_b.ndim, a->idx_wk.ndim);
        return DSOPS_ERR_SHAPE;
    }
    const int64_t T = a->x.shape[0], DI = a->idx_wk.shape[0], rows = a->idx_wq_b.shape[0];
    if (DI < 1 || rows % DI != 0) {
        snprintf(msg, len, "idx_wq_b.shape[0] = %lld, expected NI * DI with DI = %lld (idx_wk.shape[0])",
                 (long long)rows, (long long)DI);
        return DSOPS_ERR_SHAPE;
    }
    const int64_t NI = rows / DI;
    const bool int8 = a->idx_wq_b.dtype == DSOPS_INT8;
    int64_t tnd[3] = {T, NI, DI}, tn[2] = {T, NI};
    a->q_idx = dsops_tensor_make(NULL, int8 ? DSOPS_INT8 : DSOPS_BF16, 3, tnd);
    a->weights = dsops_tensor_make(NULL, int8 ? DSOPS_FP16 : DSOPS_BF16, 2, tn);
    if (int8)
        a->q_idx_scale = dsops_tensor_make(NULL, DSOPS_FP16, 2, tn);
    else
        memset(&a->q_idx_scale, 0, sizeof a->q_idx_scale); /* not an output of the bf16 variant */
    return DSOPS_OK;
}

static dsops_status idxp_call(dsops_context *ctx, const void *args)
{
    return dsops_indexer_prolog_v32(ctx, args);
}

/* ---- hc_pre and hc_post (mHC hyper-connections, DeepSeek-V4 only) ----------------------------- */

/* hc_pre: HC follows from x [T, HC, H]; V3.2 has no hyper-connections, so preset v32 is refused by the
 * library's initialiser. pre is an optional output: the tool always produces it. */
typedef dsops_hc_pre_args hcpre_args;

static const dsops_tensor_desc hcpre_tensors[] = {
    RUN_TENSOR(hcpre_args, x, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, HC, H]"),
    RUN_TENSOR(hcpre_args, hc_fn, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_FP32), "[(2+HC)*HC, HC*H]"),
    RUN_TENSOR(hcpre_args, hc_scale, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_FP32), "[3]"),
    RUN_TENSOR(hcpre_args, hc_base, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_FP32), "[(2+HC)*HC]"),
    RUN_TENSOR(hcpre_args, y, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, H]"),
    RUN_TENSOR(hcpre_args, post, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, HC]"),
    RUN_TENSOR(hcpre_args, comb, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, HC, HC]"),
    RUN_TENSOR(hcpre_args, pre, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, HC]"),
};

static const dsops_param_desc hcpre_params[] = {
    RUN_PARAM(hcpre_args, sinkhorn_iters, DSOPS_PARAM_INT, NULL, ">= 1 (V4: 20)"),
    RUN_PARAM(hcpre_args, norm_eps, DSOPS_PARAM_FLOAT, NULL, "RMS denominator (V4: 1e-6)"),
    RUN_PARAM(hcpre_args, hc_eps, DSOPS_PARAM_FLOAT, NULL, "gates and Sinkhorn (V4: 1e-6)"),
};

static dsops_status hcpre_init(void *args, dsops_preset preset) { return dsops_hc_pre_init(args, preset); }

static dsops_status hcpre_output_shapes(void *args, char *msg, size_t len)
{
    hcpre_args *a = args;
    if (a->x.ndim != 3) {
        snprintf(msg, len, "x has rank %d, expected 3 ([T, HC, H])", a->x.ndim);
        return DSOPS_ERR_SHAPE;
    }
    int64_t T = a->x.shape[0], HC = a->x.shape[1], H = a->x.shape[2];
    int64_t ys[2] = {T, H}, ps[2] = {T, HC}, cs[3] = {T, HC, HC};
    a->y = dsops_tensor_make(NULL, DSOPS_BF16, 2, ys);
    a->post = dsops_tensor_make(NULL, DSOPS_FP32, 2, ps);
    a->comb = dsops_tensor_make(NULL, DSOPS_FP32, 3, cs);
    a->pre = dsops_tensor_make(NULL, DSOPS_FP32, 2, ps);
    return DSOPS_OK;
}

static dsops_status hcpre_call(dsops_context *ctx, const void *args)
{
    return dsops_hc_pre(ctx, args);
}

/* hc_post: no parameters; out has the shape of residual and the dtype of x. */
typedef dsops_hc_post_args hcpost_args;

static const dsops_tensor_desc hcpost_tensors[] = {
    RUN_TENSOR(hcpost_args, x, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, H], sublayer output"),
    RUN_TENSOR(hcpost_args, residual, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, HC, H], dtype of x"),
    RUN_TENSOR(hcpost_args, post, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, HC]"),
    RUN_TENSOR(hcpost_args, comb, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, HC, HC], dtype of post"),
    RUN_TENSOR(hcpost_args, out, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, HC, H], dtype of x"),
};

static dsops_status hcpost_init(void *args, dsops_preset preset)
{
    (void)preset;
    memset(args, 0, sizeof(hcpost_args));
    return DSOPS_OK;
}

static dsops_status hcpost_output_shapes(void *args, char *msg, size_t len)
{
    hcpost_args *a = args;
    if (a->residual.ndim != 3) {
        snprintf(msg, len, "residual has rank %d, expected 3 ([T, HC, H])", a->residual.ndim);
        return DSOPS_ERR_SHAPE;
    }
    a->out = dsops_tensor_make(NULL, a->x.dtype, 3, a->residual.shape);
    return DSOPS_OK;
}

static dsops_status hcpost_call(dsops_context *ctx, const void *args)
{
    return dsops_hc_post(ctx, args);
}

/* ---- mla_prolog_v4 ------------------------------------------------------------------------------ */

/* Writes no cache. D is the rows of wkv and N the rows of wq_b over D. qr_scale exists only with int8
 * wq_b: it is produced (and written to OUT) only then. */
typedef dsops_mla_prolog_v4_args mla4_args;

static const dsops_tensor_desc mla4_tensors[] = {
    RUN_TENSOR(mla4_args, x, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, H]"),
    RUN_TENSOR(mla4_args, wq_a, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[Q, H]"),
    RUN_TENSOR(mla4_args, gamma_cq, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[Q]"),
    RUN_TENSOR(mla4_args, wq_b, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8), "[N*D, Q] (I8: int8 qr)"),
    RUN_TENSOR(mla4_args, wq_b_scale, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[N*D], int8 wq_b"),
    RUN_TENSOR(mla4_args, wkv, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[D, H], D > 64"),
    RUN_TENSOR(mla4_args, gamma_ckv, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[D]"),
    RUN_TENSOR(mla4_args, rope_cos, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64], pairs tables"),
    RUN_TENSOR(mla4_args, rope_sin, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64]"),
    RUN_TENSOR(mla4_args, q, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, N, D]"),
    RUN_TENSOR(mla4_args, kv, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, D]"),
    RUN_TENSOR(mla4_args, qr, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_INT8), "[T, Q], dtype of wq_b"),
    RUN_TENSOR(mla4_args, qr_scale, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T], int8 wq_b only (not in OUT with bf16 wq_b)"),
};

static const dsops_param_desc mla4_params[] = {
    RUN_PARAM(mla4_args, eps_cq, DSOPS_PARAM_FLOAT, NULL, "default 1e-6"),
    RUN_PARAM(mla4_args, eps_ckv, DSOPS_PARAM_FLOAT, NULL, "default 1e-6"),
    RUN_PARAM(mla4_args, eps_qh, DSOPS_PARAM_FLOAT, NULL, "per-head q norm (default 1e-6)"),
    RUN_PARAM(mla4_args, rope_mode, DSOPS_PARAM_ENUM, run_rope_modes, "default interleaved"),
    RUN_PARAM(mla4_args, rope_inverse, DSOPS_PARAM_BOOL, NULL, "default false"),
};

static dsops_status mla4_init(void *args, dsops_preset preset) { return dsops_mla_prolog_v4_init(args, preset); }

static dsops_status mla4_output_shapes(void *args, char *msg, size_t len)
{
    mla4_args *a = args;
    if (a->x.ndim != 2 || a->wq_a.ndim != 2 || a->wq_b.ndim != 2 || a->wkv.ndim != 2) {
        snprintf(msg, len,
                 "x, wq_a, wq_b and wkv have ranks %d, %d, %d and %d, expected 2 ([T, H], [Q, H], [N*D, Q], [D, H])",
                 a->x.ndim, a->wq_a.ndim, a->wq_b.ndim, a->wkv.ndim);
        return DSOPS_ERR_SHAPE;
    }
    const int64_t T = a->x.shape[0], Q = a->wq_a.shape[0], D = a->wkv.shape[0], rows = a->wq_b.shape[0];
    if (D < 1 || rows % D != 0) {
        snprintf(msg, len, "wq_b.shape[0] = %lld, expected N * D with D = %lld (wkv.shape[0])", (long long)rows,
                 (long long)D);
        return DSOPS_ERR_SHAPE;
    }
    const bool int8w = a->wq_b.dtype == DSOPS_INT8;
    int64_t tnd[3] = {T, rows / D, D}, td[2] = {T, D}, tq[2] = {T, Q}, t1[1] = {T};
    a->q = dsops_tensor_make(NULL, DSOPS_BF16, 3, tnd);
    a->kv = dsops_tensor_make(NULL, DSOPS_BF16, 2, td);
    a->qr = dsops_tensor_make(NULL, int8w ? DSOPS_INT8 : DSOPS_BF16, 2, tq);
    if (int8w)
        a->qr_scale = dsops_tensor_make(NULL, DSOPS_FP32, 1, t1);
    else
        memset(&a->qr_scale, 0, sizeof a->qr_scale); /* not an output of the bf16 variant */
    return DSOPS_OK;
}

static dsops_status mla4_call(dsops_context *ctx, const void *args)
{
    return dsops_mla_prolog_v4(ctx, args);
}

/* ---- indexer_prolog_v4 -------------------------------------------------------------------------- */

/* Writes no cache. NI is the rows of weights_proj and DI the rows of hadamard. */
typedef dsops_indexer_prolog_v4_args idxp4_args;

static const dsops_tensor_desc idxp4_tensors[] = {
    RUN_TENSOR(idxp4_args, qr, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT8), "[T, Q] (qr of mla_prolog_v4, int8 variant)"),
    RUN_TENSOR(idxp4_args, qr_scale, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T]"),
    RUN_TENSOR(idxp4_args, x, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, H]"),
    RUN_TENSOR(idxp4_args, idx_wq_b, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT8), "[NI*DI, Q]"),
    RUN_TENSOR(idxp4_args, idx_wq_b_scale, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_FP32), "[NI*DI]"),
    RUN_TENSOR(idxp4_args, weights_proj, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[NI, H]"),
    RUN_TENSOR(idxp4_args, rope_cos, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64], pairs tables"),
    RUN_TENSOR(idxp4_args, rope_sin, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, 64]"),
    RUN_TENSOR(idxp4_args, hadamard, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[DI, DI], DI >= 64"),
    RUN_TENSOR(idxp4_args, q_idx, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_INT8), "[T, NI, DI]"),
    RUN_TENSOR(idxp4_args, q_idx_scale, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_FP16), "[T, NI]"),
    RUN_TENSOR(idxp4_args, weights, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_FP16), "[T, NI]"),
};

static const dsops_param_desc idxp4_params[] = {
    RUN_PARAM(idxp4_args, weights_scale, DSOPS_PARAM_FLOAT, NULL, "default 1/sqrt(64*128)"),
    RUN_PARAM(idxp4_args, rope_mode, DSOPS_PARAM_ENUM, run_rope_modes, "default interleaved"),
    RUN_PARAM(idxp4_args, rope_inverse, DSOPS_PARAM_BOOL, NULL, "default false (vendor op: true)"),
};

static dsops_status idxp4_init(void *args, dsops_preset preset) { return dsops_indexer_prolog_v4_init(args, preset); }

static dsops_status idxp4_output_shapes(void *args, char *msg, size_t len)
{
    idxp4_args *a = args;
    if (a->qr.ndim != 2 || a->weights_proj.ndim != 2 || a->hadamard.ndim != 2) {
        snprintf(msg, len,
                 "qr, weights_proj and hadamard have ranks %d, %d and %d, expected 2 ([T, Q], [NI, H], [DI, DI])",
                 a->qr.ndim, a->weights_proj.ndim, a->hadamard.ndim);
        return DSOPS_ERR_SHAPE;
    }
    const int64_t T = a->qr.shape[0], NI = a->weights_proj.shape[0], DI = a->hadamard.shape[0];
    int64_t tnd[3] = {T, NI, DI}, tn[2] = {T, NI};
    a->q_idx = dsops_tensor_make(NULL, DSOPS_INT8, 3, tnd);
    a->q_idx_scale = dsops_tensor_make(NULL, DSOPS_FP16, 2, tn);
    a->weights = dsops_tensor_make(NULL, DSOPS_FP16, 2, tn);
    return DSOPS_OK;
}

static dsops_status idxp4_call(dsops_context *ctx, const void *args)
{
    return dsops_indexer_prolog_v4(ctx, args);
}

/* ---- compressor --------------------------------------------------------------------------------- */

/* Both states are in-out: read from IN, updated at every token's position and written to OUT. The
 * number of output rows NO is whatever the caller provides room for, so it is the rows of rope_cos (one
 * table row per output row). D, ratio, overlap and rotate follow from the shapes (norm_weight [D],
 * ape [R, C*D], hadamard given); values given by --set must agree with them (the library checks), and
 * those not given are filled from the shapes so that OUT's metadata records what was used. */
typedef dsops_compressor_args cmp_args;

static const dsops_enum_value run_cmp_layouts[] = {
    {"packed", DSOPS_COMPRESSOR_PACKED}, {"row_per_seq", DSOPS_COMPRESSOR_ROW_PER_SEQ}, {NULL, 0}};

static const dsops_tensor_desc cmp_tensors[] = {
    RUN_TENSOR(cmp_args, x, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, H]"),
    RUN_TENSOR(cmp_args, cu_seqlens_q, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B+1]"),
    RUN_TENSOR(cmp_args, start_pos, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B], position of each sequence's first token"),
    RUN_TENSOR(cmp_args, wkv, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[C*D, H]"),
    RUN_TENSOR(cmp_args, wgate, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[C*D, H]"),
    RUN_TENSOR(cmp_args, ape, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_FP32), "[R, C*D], C = 2: overlap"),
    RUN_TENSOR(cmp_args, norm_weight, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[D]"),
    RUN_TENSOR(cmp_args, hadamard, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[D, D], given: rotate"),
    RUN_TENSOR(cmp_args, rope_cos, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[NO, 64], row r serves out row r"),
    RUN_TENSOR(cmp_args, rope_sin, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_FP32), "[NO, 64]"),
    RUN_TENSOR(cmp_args, kv_state, DSOPS_ARG_INOUT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[NBS, BSS, C*D]"),
    RUN_TENSOR(cmp_args, score_state, DSOPS_ARG_INOUT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[NBS2, BSS2, C*D]"),
    RUN_TENSOR(cmp_args, kv_state_block_table, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B, MBS]"),
    RUN_TENSOR(cmp_args, score_state_block_table, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B, MBS2]"),
    RUN_TENSOR(cmp_args, out, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[NO, D], NO = rows of rope_cos"),
    RUN_TENSOR(cmp_args, out_count, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B], entries per sequence"),
};

static const dsops_param_desc cmp_params[] = {
    {"D", DSOPS_PARAM_INT, offsetof(cmp_args, dim), sizeof(int), NULL, "head dim (default: from norm_weight)", false},
    RUN_PARAM(cmp_args, ratio, DSOPS_PARAM_INT, NULL, "R (default: rows of ape)"),
    RUN_PARAM(cmp_args, overlap, DSOPS_PARAM_BOOL, NULL, "C = 2 (default: from ape and norm_weight)"),
    RUN_PARAM(cmp_args, rotate, DSOPS_PARAM_BOOL, NULL, "Hadamard (default: whether hadamard is given)"),
    RUN_PARAM(cmp_args, norm_eps, DSOPS_PARAM_FLOAT, NULL, "default 1e-6"),
    RUN_PARAM(cmp_args, rope_mode, DSOPS_PARAM_ENUM, run_rope_modes, "default interleaved"),
    RUN_PARAM(cmp_args, rope_inverse, DSOPS_PARAM_BOOL, NULL, "default false"),
    RUN_PARAM(cmp_args, out_layout, DSOPS_PARAM_ENUM, run_cmp_layouts, "default packed (vendor op: row_per_seq)"),
};
enum { CMP_PARAM_D = 0, CMP_PARAM_RATIO = 1, CMP_PARAM_OVERLAP = 2, CMP_PARAM_ROTATE = 3 };

static dsops_status cmp_init(void *args, dsops_preset preset) { return dsops_compressor_init(args, preset); }

/* Only unambiguous shapes fill a value; otherwise "from the shapes" stays and the library reports them. */
static void cmp_infer(void *args, const bool *given)
{
    cmp_args *a = args;
    const bool have_d = a->norm_weight.ndim == 1 && a->norm_weight.shape[0] >= 1 && a->norm_weight.shape[0] <= INT_MAX;
    const int64_t D = have_d ? a->norm_weight.shape[0] : 0;
    if (!given[CMP_PARAM_D] && have_d)
        a->dim = (int)D;
    if (!given[CMP_PARAM_RATIO] && a->ape.ndim == 2 && a->ape.shape[0] >= 1 && a->ape.shape[0] <= INT_MAX)
        a->ratio = (int)a->ape.shape[0];
    if (!given[CMP_PARAM_OVERLAP] && have_d && a->ape.ndim == 2 && (a->ape.shape[1] == D || a->ape.shape[1] == 2 * D))
        a->overlap = a->ape.shape[1] == 2 * D;
    if (!given[CMP_PARAM_ROTATE])
        a->rotate = a->hadamard.data != NULL;
}

static dsops_status cmp_output_shapes(void *args, char *msg, size_t len)
{
    cmp_args *a = args;
    if (a->rope_cos.ndim != 2 || a->norm_weight.ndim != 1 || a->start_pos.ndim != 1) {
        snprintf(msg, len, "rope_cos, norm_weight and start_pos have ranks %d, %d and %d, expected 2, 1 and 1",
                 a->rope_cos.ndim, a->norm_weight.ndim, a->start_pos.ndim);
        return DSOPS_ERR_SHAPE;
    }
    int64_t od[2] = {a->rope_cos.shape[0], a->norm_weight.shape[0]}, b1[1] = {a->start_pos.shape[0]};
    a->out = dsops_tensor_make(NULL, DSOPS_BF16, 2, od);
    a->out_count = dsops_tensor_make(NULL, DSOPS_INT32, 1, b1);
    return DSOPS_OK;
}

static dsops_status cmp_call(dsops_context *ctx, const void *args)
{
    return dsops_compressor(ctx, args);
}

/* ---- sas (swa, cfa, scfa) ------------------------------------------------------------------------ */

/* One operator under four names: `sas` and its variants `swa`, `cfa`, `scfa` (spec §1.9, §3.7). The variant
 * chooses the default of every scalar parameter (the variant table of §3.7); a value given by --set or IN's
 * metadata overrides its default. The variant names fix the variant (a contradicting `variant` value is
 * an error); `sas` takes it from `variant`, else from a given cmp_mode (none: swa, dense: cfa, sparse: scfa),
 * else from the tensors present (cmp_indices: scfa, cmp_kv: cfa, neither: swa). The tool keeps the variant
 * and the preset next to the operator's arguments; the operator's struct is the first member. lse is
 * always produced, as for sparse_flash_attention_v32. */
typedef struct sas_run_args {
    dsops_sas_args op;
    int variant;          /* dsops_sas_variant used; -1 until resolved */
    int fixed_variant;    /* the entry's own variant, or -1 for `sas` */
    dsops_preset preset;  /* for the variant's defaults, applied after the tensors are known */
} sas_run_args;

#define SAS_TENSOR(field, dir, dtypes, note) {#field, offsetof(sas_run_args, op.field), dir, dtypes, note}
#define SAS_PARAM(field, kind, spellings, note) \
    {#field, kind, offsetof(sas_run_args, op.field), sizeof(((sas_run_args *)0)->op.field), spellings, note, false}

static const dsops_enum_value run_cmp_modes[] = {
    {"none", DSOPS_CMP_NONE}, {"dense", DSOPS_CMP_DENSE}, {"sparse", DSOPS_CMP_SPARSE}, {NULL, 0}};

static const dsops_enum_value run_sas_variants[] = {
    {"swa", DSOPS_SAS_SWA}, {"cfa", DSOPS_SAS_CFA}, {"scfa", DSOPS_SAS_SCFA}, {NULL, 0}};

static const dsops_tensor_desc sas_tensors[] = {
    SAS_TENSOR(q, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, N, D]"),
    SAS_TENSOR(cu_seqlens_q, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B+1]"),
    SAS_TENSOR(seqused_kv, DSOPS_ARG_IN, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B], original tokens, the call's included"),
    SAS_TENSOR(ori_kv, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_UINT8),
               "[NBW, BSW, D] bf16, or MODEL1 FP8 blocks [NBW, BSW, 584] uint8; window pool (win_size > 0)"),
    SAS_TENSOR(ori_block_table, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B, MBW], with ori_kv"),
    SAS_TENSOR(cmp_kv, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_BF16) | DSOPS_DTYPE_BIT(DSOPS_UINT8),
               "[NBC, BSC, D] bf16, or MODEL1 FP8 blocks [NBC, BSC, 584] uint8; compressed pool (cmp_mode dense, sparse)"),
    SAS_TENSOR(cmp_block_table, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_INT32), "[B, MBC], with cmp_kv"),
    SAS_TENSOR(cmp_indices, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_INT32), "[T, K], cmp_mode sparse; -1 = skip"),
    SAS_TENSOR(cmp_topk_length, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_INT32), "[T], cmp_mode sparse"),
    SAS_TENSOR(sinks, DSOPS_ARG_IN_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[N]"),
    SAS_TENSOR(out, DSOPS_ARG_OUT, DSOPS_DTYPE_BIT(DSOPS_BF16), "[T, N, D]"),
    SAS_TENSOR(lse, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, N]"),
    SAS_TENSOR(max_logits, DSOPS_ARG_OUT_OPT, DSOPS_DTYPE_BIT(DSOPS_FP32), "[T, N], largest score"),
};

static const dsops_enum_value run_sas_pool_layouts[] = {
    {"bf16", DSOPS_SAS_POOL_BF16}, {"model1_fp8", DSOPS_SAS_POOL_MODEL1_FP8}, {NULL, 0}};

static const dsops_param_desc sas_params[] = {
    {"variant", DSOPS_PARAM_ENUM, offsetof(sas_run_args, variant), sizeof(int), run_sas_variants,
     "defaults of the parameters below; sas: from cmp_mode, else cmp_indices -> scfa, cmp_kv -> cfa, else swa",
     false},
    SAS_PARAM(softmax_scale, DSOPS_PARAM_FLOAT, NULL, "default 512^-0.5"),
    SAS_PARAM(win_size, DSOPS_PARAM_INT, NULL, ">= 0, 0 = no window (default 128)"),
    SAS_PARAM(cmp_mode, DSOPS_PARAM_ENUM, run_cmp_modes, "swa: none, cfa: dense, scfa: sparse"),
    SAS_PARAM(cmp_ratio, DSOPS_PARAM_INT, NULL, "cfa: 128, scfa: 4"),
    SAS_PARAM(p_mode, DSOPS_PARAM_ENUM, run_p_modes, "swa, scfa: normalised; cfa: tiled"),
    SAS_PARAM(p_tile, DSOPS_PARAM_INT, NULL, "tile length of p_mode=tiled (cfa: 128)"),
    SAS_PARAM(pool_layout, DSOPS_PARAM_ENUM, run_sas_pool_layouts,
              "default: model1_fp8 if a pool is uint8, else bf16"),
};
enum {
    SAS_PARAM_VARIANT = 0,
    SAS_PARAM_SCALE = 1,
    SAS_PARAM_WIN = 2,
    SAS_PARAM_CMP_MODE = 3,
    SAS_PARAM_RATIO = 4,
    SAS_PARAM_P_MODE = 5,
    SAS_PARAM_P_TILE = 6,
    SAS_PARAM_POOL_LAYOUT = 7
};

static dsops_status sas_init_variant(void *args, dsops_preset preset, int fixed_variant)
{
    sas_run_args *w = args;
    w->variant = -1;
    w->fixed_variant = fixed_variant;
    w->preset = preset;
    /* the preset is judged here (v32 has no sas layer); the variant's defaults follow in sas_infer */
    return dsops_sas_init(&w->op, preset, fixed_variant >= 0 ? (dsops_sas_variant)fixed_variant : DSOPS_SAS_SWA);
}

static dsops_status sas_init(void *args, dsops_preset preset) { return sas_init_variant(args, preset, -1); }
static dsops_status swa_init(void *args, dsops_preset preset) { return sas_init_variant(args, preset, DSOPS_SAS_SWA); }
static dsops_status cfa_init(void *args, dsops_preset preset) { return sas_init_variant(args, preset, DSOPS_SAS_CFA); }
static dsops_status scfa_init(void *args, dsops_preset preset)
{
    return sas_init_variant(args, preset, DSOPS_SAS_SCFA);
}

static void sas_infer(void *args, const bool *given)
{
    sas_run_args *w = args;
    if (!given[SAS_PARAM_VARIANT]) {
        if (w->fixed_variant >= 0)
            w->variant = w->fixed_variant;
        else if (given[SAS_PARAM_CMP_MODE])
            w->variant = w->op.cmp_mode == DSOPS_CMP_SPARSE  ? DSOPS_SAS_SCFA
                         : w->op.cmp_mode == DSOPS_CMP_DENSE ? DSOPS_SAS_CFA
                                                             : DSOPS_SAS_SWA;
        else
            w->variant = w->op.cmp_indices.data != NULL ? DSOPS_SAS_SCFA
                         : w->op.cmp_kv.data != NULL    ? DSOPS_SAS_CFA
                                                        : DSOPS_SAS_SWA;
    }
    if (w->fixed_variant >= 0 && w->variant != w->fixed_variant)
        return; /* sas_output_shapes reports the contradiction */
    dsops_sas_args d;
    (void)dsops_sas_init(&d, w->preset, (dsops_sas_variant)w->variant); /* the preset passed sas_init_variant */
    if (!given[SAS_PARAM_SCALE])
        w->op.softmax_scale = d.softmax_scale;
    if (!given[SAS_PARAM_WIN])
        w->op.win_size = d.win_size;
    if (!given[SAS_PARAM_CMP_MODE])
        w->op.cmp_mode = d.cmp_mode;
    if (!given[SAS_PARAM_RATIO])
        w->op.cmp_ratio = d.cmp_ratio;
    if (!given[SAS_PARAM_P_MODE])
        w->op.p_mode = d.p_mode;
    if (!given[SAS_PARAM_P_TILE])
        w->op.p_tile = d.p_tile;
    if (!given[SAS_PARAM_POOL_LAYOUT])
        w->op.pool_layout = w->op.ori_kv.dtype == DSOPS_UINT8 || w->op.cmp_kv.dtype == DSOPS_UINT8
                                ? DSOPS_SAS_POOL_MODEL1_FP8
                                : DSOPS_SAS_POOL_BF16;
}

static dsops_status sas_output_shapes(void *args, char *msg, size_t len)
{
    sas_run_args *w = args;
    if (w->fixed_variant >= 0 && w->variant != w->fixed_variant) {
        snprintf(msg, len, "variant = %s contradicts the operator name %s (use sas --set variant=%s)",
                 dsops_enum_spelling(run_sas_variants, w->variant), dsops_enum_spelling(run_sas_variants, w->fixed_variant),
                 dsops_enum_spelling(run_sas_variants, w->variant));
        return DSOPS_ERR_PARAM;
    }
    if (w->op.q.ndim != 3) {
        snprintf(msg, len, "q has rank %d, expected 3 ([T, N, D])", w->op.q.ndim);
        return DSOPS_ERR_SHAPE;
    }
    int64_t tnd[3] = {w->op.q.shape[0], w->op.q.shape[1], w->op.q.shape[2]};
    w->op.out = dsops_tensor_make(NULL, DSOPS_BF16, 3, tnd);
    w->op.lse = dsops_tensor_make(NULL, DSOPS_FP32, 2, tnd);
    w->op.max_logits = dsops_tensor_make(NULL, DSOPS_FP32, 2, tnd);
    return DSOPS_OK;
}

static dsops_status sas_call(dsops_context *ctx, const void *args)
{
    const sas_run_args *w = args;
    return dsops_sas(ctx, &w->op);
}

/* ---- the registry ---------------------------------------------------------------------------- */

/* Weight packing of the operators that have it (the record is the args struct). */
static dsops_status dia_prepare(dsops_context *ctx, const void *args, dsops_prepared **out)
{
    return dsops_sparse_attention_v32_prepare(ctx, args, out);
}

static dsops_status mlap_prepare(dsops_context *ctx, const void *args, dsops_prepared **out)
{
    return dsops_mla_prolog_v32_prepare(ctx, args, out);
}

static dsops_status idxp_prepare(dsops_context *ctx, const void *args, dsops_prepared **out)
{
    return dsops_indexer_prolog_v32_prepare(ctx, args, out);
}

static dsops_status hcpre_prepare(dsops_context *ctx, const void *args, dsops_prepared **out)
{
    return dsops_hc_pre_prepare(ctx, args, out);
}

static dsops_status mla4_prepare(dsops_context *ctx, const void *args, dsops_prepared **out)
{
    return dsops_mla_prolog_v4_prepare(ctx, args, out);
}

static dsops_status idxp4_prepare(dsops_context *ctx, const void *args, dsops_prepared **out)
{
    return dsops_indexer_prolog_v4_prepare(ctx, args, out);
}

static dsops_status cmp_prepare(dsops_context *ctx, const void *args, dsops_prepared **out)
{
    return dsops_compressor_prepare(ctx, args, out);
}

static const dsops_op_desc ops[] = {
    {"sparse_flash_attention_v32", sizeof(sfa_args), sfa_tensors, RUN_COUNT(sfa_tensors), sfa_params,
     RUN_COUNT(sfa_params), DSOPS_PRESET_V32, sfa_init, sfa_infer, sfa_output_shapes, sfa_call, NULL, NULL, 0},
    {"lightning_indexer", sizeof(li_run_args), li_tensors, RUN_COUNT(li_tensors), li_params, RUN_COUNT(li_params),
     DSOPS_PRESET_V32, li_init, NULL, li_output_shapes, li_call, NULL, NULL, 0},
    {"rmsnorm", sizeof(rms_args), rms_tensors, RUN_COUNT(rms_tensors), rms_params, RUN_COUNT(rms_params),
     DSOPS_PRESET_V32, rms_init, NULL, rms_output_shapes, rms_call, NULL, NULL, 0},
    {"rope_tables", sizeof(rt_run_args), rt_tensors, RUN_COUNT(rt_tensors), rt_params, RUN_COUNT(rt_params),
     DSOPS_PRESET_V32, rt_init, NULL, rt_output_shapes, rt_call, NULL, NULL, 0},
    {"rope_apply", sizeof(ra_args), ra_tensors, RUN_COUNT(ra_tensors), ra_params, RUN_COUNT(ra_params),
     DSOPS_PRESET_V32, ra_init, NULL, ra_output_shapes, ra_call, NULL, NULL, 0},
    {"quant_q8", sizeof(qa_args), qa_tensors, RUN_COUNT(qa_tensors), qa_params, RUN_COUNT(qa_params),
     DSOPS_PRESET_V32, qa_init, qa_infer, qa_output_shapes, qa_call, NULL, NULL, 0},
    {"cache_store", sizeof(cst_args), cst_tensors, RUN_COUNT(cst_tensors), cst_params, RUN_COUNT(cst_params),
     DSOPS_PRESET_V32, cst_init, NULL, cst_output_shapes, cst_call, NULL, NULL, 0},
    {"nd_to_fractal_nz", sizeof(nz_run_args), to_nz_tensors, RUN_COUNT(to_nz_tensors), NULL, 0, DSOPS_PRESET_V32,
     nz_init, NULL, to_nz_output_shapes, to_nz_call, NULL, NULL, 0},
    {"fractal_nz_to_nd", sizeof(nz_run_args), to_nd_tensors, RUN_COUNT(to_nd_tensors), to_nd_params,
     RUN_COUNT(to_nd_params), DSOPS_PRESET_V32, nz_init, NULL, to_nd_output_shapes, to_nd_call, NULL, NULL, 0},
    {"fp8_cache_quantize", sizeof(fp8c_run_args), fp8q_tensors, RUN_COUNT(fp8q_tensors), fp8q_params,
     RUN_COUNT(fp8q_params), DSOPS_PRESET_V32, fp8c_init, NULL, fp8q_output_shapes, fp8q_call, NULL, NULL, 0},
    {"fp8_cache_dequantize", sizeof(fp8c_run_args), fp8d_tensors, RUN_COUNT(fp8d_tensors), fp8d_params,
     RUN_COUNT(fp8d_params), DSOPS_PRESET_V32, fp8c_init, NULL, fp8d_output_shapes, fp8d_call, NULL, NULL, 0},
    {"sparse_attention_v32", sizeof(dia_args), dia_tensors, RUN_COUNT(dia_tensors), dia_params, RUN_COUNT(dia_params),
     DSOPS_PRESET_V32, dia_init, dia_infer, dia_output_shapes, dia_call, NULL, dia_prepare, offsetof(dia_args, prepared)},
    {"mla_prolog_v32", sizeof(mlap_args), mlap_tensors, RUN_COUNT(mlap_tensors), mlap_params, RUN_COUNT(mlap_params),
     DSOPS_PRESET_V32, mlap_init, mlap_infer, mlap_output_shapes, mlap_call, NULL, mlap_prepare, offsetof(mlap_args, prepared)},
    {"indexer_prolog_v32", sizeof(idxp_args), idxp_tensors, RUN_COUNT(idxp_tensors), idxp_params,
     RUN_COUNT(idxp_params), DSOPS_PRESET_V32, idxp_init, NULL, idxp_output_shapes, idxp_call, NULL, idxp_prepare, offsetof(idxp_args, prepared)},
    {"hc_pre", sizeof(hcpre_args), hcpre_tensors, RUN_COUNT(hcpre_tensors), hcpre_params, RUN_COUNT(hcpre_params),
     DSOPS_PRESET_V4_FLASH, hcpre_init, NULL, hcpre_output_shapes, hcpre_call, NULL, hcpre_prepare, offsetof(hcpre_args, prepared)},
    {"hc_post", sizeof(hcpost_args), hcpost_tensors, RUN_COUNT(hcpost_tensors), NULL, 0, DSOPS_PRESET_V4_FLASH,
     hcpost_init, NULL, hcpost_output_shapes, hcpost_call, NULL, NULL, 0},
    {"mla_prolog_v4", sizeof(mla4_args), mla4_tensors, RUN_COUNT(mla4_tensors), mla4_params, RUN_COUNT(mla4_params),
     DSOPS_PRESET_V4_FLASH, mla4_init, NULL, mla4_output_shapes, mla4_call, NULL, mla4_prepare, offsetof(mla4_args, prepared)},
    {"indexer_prolog_v4", sizeof(idxp4_args), idxp4_tensors, RUN_COUNT(idxp4_tensors), idxp4_params,
     RUN_COUNT(idxp4_params), DSOPS_PRESET_V4_FLASH, idxp4_init, NULL, idxp4_output_shapes, idxp4_call, NULL, idxp4_prepare, offsetof(idxp4_args, prepared)},
    {"compressor", sizeof(cmp_args), cmp_tensors, RUN_COUNT(cmp_tensors), cmp_params, RUN_COUNT(cmp_params),
     DSOPS_PRESET_V4_FLASH, cmp_init, cmp_infer, cmp_output_shapes, cmp_call, NULL, cmp_prepare, offsetof(cmp_args, prepared)},
    {"sas", sizeof(sas_run_args), sas_tensors, RUN_COUNT(sas_tensors), sas_params, RUN_COUNT(sas_params),
     DSOPS_PRESET_V4_FLASH, sas_init, sas_infer, sas_output_shapes, sas_call, NULL, NULL, 0},
    {"swa", sizeof(sas_run_args), sas_tensors, RUN_COUNT(sas_tensors), sas_params, RUN_COUNT(sas_params),
     DSOPS_PRESET_V4_FLASH, swa_init, sas_infer, sas_output_shapes, sas_call, "sas", NULL, 0},
    {"cfa", sizeof(sas_run_args), sas_tensors, RUN_COUNT(sas_tensors), sas_params, RUN_COUNT(sas_params),
     DSOPS_PRESET_V4_FLASH, cfa_init, sas_infer, sas_output_shapes, sas_call, "sas", NULL, 0},
    {"scfa", sizeof(sas_run_args), sas_tensors, RUN_COUNT(sas_tensors), sas_params, RUN_COUNT(sas_params),
     DSOPS_PRESET_V4_FLASH, scfa_init, sas_infer, sas_output_shapes, sas_call, "sas", NULL, 0},
};

size_t dsops_op_count(void) { return sizeof ops / sizeof ops[0]; }

const dsops_op_desc *dsops_op_at(size_t i) { return i < dsops_op_count() ? &ops[i] : NULL; }

const dsops_op_desc *dsops_op_find(const char *name)
{
    for (size_t i = 0; name && i < dsops_op_count(); i++)
        if (strcmp(ops[i].name, name) == 0)
            return &ops[i];
    return NULL;
}

const dsops_enum_value *dsops_preset_spellings(void) { return presets; }

const char *dsops_enum_spelling(const dsops_enum_value *e, int value)
{
    for (; e && e->spelling; e++)
        if (e->value == value)
            return e->spelling;
    return "?";
}
