/* sas (spec §3.7): DeepSeek-V4 shared-KV attention (swa, cfa, scfa are presets). Validate -> plan work
 * items (token x head chunk) -> per item, resolve the key list (window rows, then compressed rows) to
 * pool addresses and run the attention core shared with sparse_flash_attention_v32. */
#include <math.h>
#include <stdlib.h>

#include "attention_core.h"
#include "internal.h"
#include "sequences.h"

typedef dsops_sas_args sas_args;

dsops_status dsops_sas_init(sas_args *a, dsops_preset preset, dsops_sas_variant variant)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    a->softmax_scale = (float)(1.0 / sqrt(512.0));
    a->win_size = 128;
    a->p_tile = 128;
    a->p_mode = DSOPS_P_NORMALISED;
    a->cmp_ratio = 1;
    switch (variant) {
    case DSOPS_SAS_SWA:
        a->cmp_mode = DSOPS_CMP_NONE;
        break;
    case DSOPS_SAS_CFA:
        a->cmp_mode = DSOPS_CMP_DENSE;
        a->cmp_ratio = 128;
        a->p_mode = DSOPS_P_TILED;
        break;
    case DSOPS_SAS_SCFA:
        a->cmp_mode = DSOPS_CMP_SPARSE;
        a->cmp_ratio = 4;
        break;
    default:
        return dsops_fail(DSOPS_ERR_PARAM, "variant = %d is not a dsops_sas_variant value", (int)variant);
    }
    if (preset != DSOPS_PRESET_V4_FLASH && preset != DSOPS_PRESET_V4_PRO)
        return dsops_fail(DSOPS_ERR_PARAM, "preset = %d: sas exists only for the V4 presets", (int)preset);
    dsops_clear_error();
    return DSOPS_OK;
}

/* ---- validation ------------------------------------------------------------------------------ */

typedef struct sas_dims {
    int64_t T, N, D, B, K;
    int64_t NBW, BSW, MBW; /* window pool */
    int64_t NBC, BSC, MBC; /* compressed pool */
    bool window, compressed;
} sas_dims;

static int32_t i32_at2(const dsops_tensor *t, int64_t i, int64_t j) { return *(const int32_t *)dsops_at2(t, i, j); }

enum { MODEL1_ROW = 584, MODEL1_BODY = 576, MODEL1_NOPE = 448, MODEL1_SCALES = 8 }; /* bytes (spec §2.12) */

/* A pool [NB, BS, D] bf16, or MODEL1 FP8 blocks [NB, BS, 584] uint8, and its block table [B, MB] int32. */
static dsops_status check_pool(const sas_args *a, const dsops_tensor *pool, const char *pname,
                               const dsops_tensor *table, const char *tname, const sas_dims *d, int64_t *NB,
                               int64_t *BS, int64_t *MB)
{
    if (a->pool_layout == DSOPS_SAS_POOL_MODEL1_FP8) {
        DSOPS_TRY(dsops_check_tensor(pool, pname, 3, DSOPS_DT(DSOPS_UINT8), true));
        if (d->D != 512)
            return dsops_fail(DSOPS_ERR_SHAPE, "q.shape[2] = %lld, expected 512 (MODEL1 FP8 pools)", (long long)d->D);
        DSOPS_TRY(dsops_check_dim(pool, pname, 2, MODEL1_ROW, "584 bytes per token (MODEL1)"));
        if (pool->stride[2] != 1 || pool->stride[1] != MODEL1_ROW || pool->stride[0] < pool->shape[1] * MODEL1_ROW)
            return dsops_fail(DSOPS_ERR_SHAPE,
                              "%s has strides [%lld, %lld, %lld]: MODEL1 blocks need [block bytes >= BS * 584, 584, 1]",
                              pname, (long long)pool->stride[0], (long long)pool->stride[1], (long long)pool->stride[2]);
    } else {
        DSOPS_TRY(dsops_check_tensor(pool, pname, 3, DSOPS_DT(DSOPS_BF16), true));
    }
    *NB = pool->shape[0];
    *BS = pool->shape[1];
    if (*NB < 1 || *NB > INT32_MAX || *BS < 1 || *BS > INT32_MAX)
        return dsops_fail(DSOPS_ERR_SHAPE, "%s has NB = %lld, BS = %lld, expected both in [1, 2^31)", pname,
                          (long long)*NB, (long long)*BS);
    if (a->pool_layout == DSOPS_SAS_POOL_BF16)
        DSOPS_TRY(dsops_check_dim(pool, pname, 2, d->D, "D of q"));
    DSOPS_TRY(dsops_check_tensor(table, tname, 2, DSOPS_DT(DSOPS_INT32), false));
    DSOPS_TRY(dsops_check_dim(table, tname, 0, d->B, "B = cu_seqlens_q.shape[0] - 1"));
    *MB = table->shape[1];
    return DSOPS_OK;
}

static dsops_status check_params(const sas_args *a)
{
    if (!isfinite(a->softmax_scale))
        return dsops_fail(DSOPS_ERR_PARAM, "softmax_scale = %g is not finite", (double)a->softmax_scale);
    if (a->win_size < 0)
        return dsops_fail(DSOPS_ERR_PARAM, "win_size = %d, expected >= 0", a->win_size);
    if ((int)a->cmp_mode < 0 || (int)a->cmp_mode > DSOPS_CMP_SPARSE)
        return dsops_fail(DSOPS_ERR_PARAM, "cmp_mode = %d is not a dsops_cmp_mode value", (int)a->cmp_mode);
    if (a->cmp_ratio < 1)
        return dsops_fail(DSOPS_ERR_PARAM, "cmp_ratio = %d, expected >= 1", a->cmp_ratio);
    if ((int)a->p_mode < 0 || (int)a->p_mode > DSOPS_P_FP32)
        return dsops_fail(DSOPS_ERR_PARAM, "p_mode = %d is not a dsops_p_mode value", (int)a->p_mode);
    if ((int)a->pool_layout < 0 || (int)a->pool_layout > DSOPS_SAS_POOL_MODEL1_FP8)
        return dsops_fail(DSOPS_ERR_PARAM, "pool_layout = %d is not a dsops_sas_pool_layout value",
                          (int)a->pool_layout);
    if (a->p_mode == DSOPS_P_TILED && a->p_tile < 1)
        return dsops_fail(DSOPS_ERR_PARAM, "p_tile = %d, expected >= 1 (p_mode tiled)", a->p_tile);
    return DSOPS_OK;
}

static dsops_status check_shapes(const sas_args *a, sas_dims *d)
{
    const unsigned i32 = DSOPS_DT(DSOPS_INT32);
    DSOPS_TRY(check_params(a));
    DSOPS_TRY(dsops_check_tensor(&a->q, "q", 3, DSOPS_DT(DSOPS_BF16), true));
    d->T = a->q.shape[0];
    d->N = a->q.shape[1];
    d->D = a->q.shape[2];
    if (d->N < 1 || d->D < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "q has N = %lld, D = %lld, expected both >= 1", (long long)d->N, (long long)d->D);
    if (d->N > (1 << 20) || d->D > 65536)
        return dsops_fail(DSOPS_ERR_UNSUPPORTED, "q has N = %lld, D = %lld: this build supports N <= 2^20, D <= 65536",
                          (long long)d->N, (long long)d->D);
    DSOPS_TRY(dsops_check_tensor(&a->cu_seqlens_q, "cu_seqlens_q", 1, i32, false));
    if (a->cu_seqlens_q.shape[0] < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "cu_seqlens_q.shape[0] = 0, expected B + 1 >= 1");
    d->B = a->cu_seqlens_q.shape[0] - 1;
    DSOPS_TRY(dsops_check_tensor(&a->seqused_kv, "seqused_kv", 1, i32, false));
    DSOPS_TRY(dsops_check_dim(&a->seqused_kv, "seqused_kv", 0, d->B, "B = cu_seqlens_q.shape[0] - 1"));
    d->window = a->win_size > 0;
    d->compressed = a->cmp_mode != DSOPS_CMP_NONE;
    if (d->window)
        DSOPS_TRY(check_pool(a, &a->ori_kv, "ori_kv", &a->ori_block_table, "ori_block_table", d, &d->NBW, &d->BSW,
                             &d->MBW));
    if (d->compressed)
        DSOPS_TRY(check_pool(a, &a->cmp_kv, "cmp_kv", &a->cmp_block_table, "cmp_block_table", d, &d->NBC, &d->BSC,
                             &d->MBC));
    d->K = 0;
    if (a->cmp_mode == DSOPS_CMP_SPARSE) {
        DSOPS_TRY(dsops_check_topk_tensor(&a->cmp_indices, "cmp_indices", d->T, "T of q", &d->K));
        if (dsops_tensor_present(&a->cmp_topk_length)) {
            DSOPS_TRY(dsops_check_tensor(&a->cmp_topk_length, "cmp_topk_length", 1, i32, false));
            DSOPS_TRY(dsops_check_dim(&a->cmp_topk_length, "cmp_topk_length", 0, d->T, "T of q"));
        }
    }
    DSOPS_TRY(dsops_check_tensor(&a->out, "out", 3, DSOPS_DT(DSOPS_BF16), true));
    DSOPS_TRY(dsops_check_dim(&a->out, "out", 0, d->T, "T of q"));
    DSOPS_TRY(dsops_check_dim(&a->out, "out", 1, d->N, "N of q"));
    DSOPS_TRY(dsops_check_dim(&a->out, "out", 2, d->D, "D of q"));
    DSOPS_TRY(dsops_attn_check_heads(&a->sinks, &a->lse, &a->max_logits, d->T, d->N, "q"));
    const dsops_named_tensor outs[] = {{&a->out, "out"}, {&a->lse, "lse"}, {&a->max_logits, "max_logits"}};
    const dsops_named_tensor ins[] = {
        {&a->q, "q"}, {&a->cu_seqlens_q, "cu_seqlens_q"}, {&a->seqused_kv, "seqused_kv"}, {&a->ori_kv, "ori_kv"},
        {&a->ori_block_table, "ori_block_table"}, {&a->cmp_kv, "cmp_kv"}, {&a->cmp_block_table, "cmp_block_table"},
        {&a->cmp_indices, "cmp_indices"}, {&a->cmp_topk_length, "cmp_topk_length"}, {&a->sinks, "sinks"}};
    return dsops_check_outputs_apart(outs, sizeof outs / sizeof outs[0], ins, sizeof ins / sizeof ins[0]);
}

/* Token t's key-list parts: window positions [L - w, L), compressed count (dense: entries [0, n);
 * sparse: the first n entries of cmp_indices[t], each used iff 0 <= idx < nc_valid). */
typedef struct sas_token {
    int64_t b, L, w, n, nc_valid;
} sas_token;

static sas_token token_plan(const sas_args *a, const sas_dims *d, int64_t t)
{
    sas_token k;
    int64_t S, i;
    dsops_token_of(&a->cu_seqlens_q, d->B, t, &k.b, &S, &i);
    int64_t used = dsops_i32_at(&a->seqused_kv, k.b);
    k.L = used - (S - 1 - i);
    int64_t Lp = k.L > 0 ? k.L : 0, ncausal = Lp / a->cmp_ratio;
    k.w = d->window ? (Lp < a->win_size ? Lp : a->win_size) : 0;
    k.nc_valid = used / a->cmp_ratio;
    k.n = 0;
    if (a->cmp_mode == DSOPS_CMP_DENSE) {
        k.n = ncausal;
    } else if (a->cmp_mode == DSOPS_CMP_SPARSE) {
        k.n = d->K < ncausal ? d->K : ncausal;
        if (dsops_tensor_present(&a->cmp_topk_length) && dsops_i32_at(&a->cmp_topk_length, t) < k.n)
            k.n = dsops_i32_at(&a->cmp_topk_length, t);
    }
    return k;
}

/* V7 for position p of sequence b in a pool. */
static dsops_status check_slot(const dsops_tensor *table, const char *tname, int64_t NB, int64_t BS, int64_t MB,
                               int64_t b, int64_t p, const char *what, int64_t t)
{
    int64_t col = p / BS;
    if (col >= MB)
        return dsops_fail(DSOPS_ERR_INDEX, "%s %lld of token %lld needs %s column %lld, outside [0, %lld)", what,
                          (long long)p, (long long)t, tname, (long long)col, (long long)MB);
    int32_t blk = i32_at2(table, b, col);
    if (blk < 0 || blk >= NB)
        return dsops_fail(DSOPS_ERR_INDEX, "%s[%lld][%lld] = %d is outside [0, %lld) (needed by %s %lld of token %lld)",
                          tname, (long long)b, (long long)col, blk, (long long)NB, what, (long long)p, (long long)t);
    return DSOPS_OK;
}

/* Sequence descriptors (V6), cmp_topk_length, and V7 for every needed window position and compressed
 * entry. Window and dense ranges grow with the token's position, so each sequence checks a position once;
 * returns the longest key list in *nmax. */
static dsops_status check_indices(const sas_args *a, const sas_dims *d, int64_t *nmax)
{
    DSOPS_TRY(dsops_check_sequence_values(&a->cu_seqlens_q, &a->seqused_kv, "seqused_kv", d->B, d->T));
    if (a->cmp_mode == DSOPS_CMP_SPARSE && dsops_tensor_present(&a->cmp_topk_length)) /* other modes ignore it */
        for (int64_t t = 0; t < d->T; t++)
            if (dsops_i32_at(&a->cmp_topk_length, t) < 0)
                return dsops_fail(DSOPS_ERR_INDEX, "cmp_topk_length[%lld] = %d is negative", (long long)t,
                                  dsops_i32_at(&a->cmp_topk_length, t));
    *nmax = 0;
    int64_t win_done = -1, dense_done = -1, last_b = -1; /* highest position / entry checked in sequence last_b */
    for (int64_t t = 0; t < d->T; t++) {
        sas_token k = token_plan(a, d, t);
        if (k.b != last_b) {
            win_done = dense_done = -1;
            last_b = k.b;
        }
        int64_t listed = k.w + (a->cmp_mode == DSOPS_CMP_SPARSE ? 0 : k.n);
        for (int64_t p = k.L - k.w > win_done + 1 ? k.L - k.w : win_done + 1; p < k.L; p++)
            DSOPS_TRY(check_slot(&a->ori_block_table, "ori_block_table", d->NBW, d->BSW, d->MBW, k.b, p,
                                 "window position", t));
        win_done = k.L - 1 > win_done ? k.L - 1 : win_done;
        if (a->cmp_mode == DSOPS_CMP_DENSE) {
            for (int64_t e = dense_done + 1; e < k.n; e++)
                DSOPS_TRY(check_slot(&a->cmp_block_table, "cmp_block_table", d->NBC, d->BSC, d->MBC, k.b, e,
                                     "compressed entry", t));
            dense_done = k.n - 1 > dense_done ? k.n - 1 : dense_done;
        } else if (a->cmp_mode == DSOPS_CMP_SPARSE) {
            for (int64_t j = 0; j < k.n; j++) {
                int64_t idx = i32_at2(&a->cmp_indices, t, j);
                if (idx < 0 || idx >= k.nc_valid)
                    continue;
                listed++;
                DSOPS_TRY(check_slot(&a->cmp_block_table, "cmp_block_table", d->NBC, d->BSC, d->MBC, k.b, idx,
                                     "compressed entry", t));
            }
        }
        *nmax = listed > *nmax ? listed : *nmax;
    }
    if (*nmax > INT32_MAX / 4)
        return dsops_fail(DSOPS_ERR_UNSUPPORTED, "a key list of %lld entries: this build supports at most 2^29",
                          (long long)*nmax);
    return DSOPS_OK;
}

/* ---- execution ------------------------------------------------------------------------------- */

/* One row of the key list: D bf16 values, or a MODEL1 row's 576 bytes (448 e4m3, 64 bf16) and its 7 scales. */
typedef struct sas_row {
    const void *row;
    const uint8_t *scales; /* MODEL1 only */
} sas_row;

typedef struct sas_rows {
    const sas_row *row; /* [n] */
    size_t bytes;       /* of one row: D * 2, or 576 */
    const dsops_attention_kernels *k;
} sas_rows;

static void row_copy(const void *src, int j, uint16_t *dst)
{
    const sas_rows *r = src;
    memcpy(dst, r->row[j].row, r->bytes);
}

/* MODEL1 (spec §2.12): latent value c is bf16(e4m3 * 2^(ue8m0 of tile c / 64 - 127)), 0xff scales NaN. */
static void row_model1(const void *src, int j, uint16_t *dst)
{
    const sas_rows *r = src;
    float scales[7];
    for (int i = 0; i < 7; i++)
        scales[i] = dsops_ue8m0_value(r->row[j].scales[i]);
    r->k->dequant_e4m3(r->row[j].row, scales, 64, MODEL1_NOPE, dst);
    memcpy(dst + MODEL1_NOPE, (const uint8_t *)r->row[j].row + MODEL1_NOPE, 128);
}

static void row_prefetch(const void *src, int j)
{
    const sas_rows *r = src;
    const char *c = (const char *)r->row[j].row;
    for (size_t off = 0; off < r->bytes; off += 64)
        __builtin_prefetch(c + off, 0, 2);
    __builtin_prefetch(c + r->bytes - 1, 0, 2);
    if (r->row[j].scales)
        __builtin_prefetch(r->row[j].scales, 0, 2);
}

static sas_row pool_row(const sas_args *a, const dsops_tensor *pool, const dsops_tensor *table, int64_t BS, int64_t b,
                        int64_t p)
{
    const int64_t blk = i32_at2(table, b, p / BS), off = p % BS;
    if (a->pool_layout == DSOPS_SAS_POOL_BF16)
        return (sas_row){dsops_at3(pool, blk, off, 0), NULL};
    const uint8_t *block = (const uint8_t *)pool->data + blk * pool->stride[0]; /* [BS x 576 | BS x 8] */
    return (sas_row){block + off * MODEL1_BODY, block + BS * MODEL1_BODY + off * MODEL1_SCALES};
}

/* Token t's key list as row addresses (window oldest first, then compressed); returns its length. */
static int collect_rows(const sas_args *a, const sas_dims *d, const sas_token *k, int64_t t, sas_row *rows)
{
    int n = 0;
    for (int64_t p = k->L - k->w; p < k->L; p++)
        rows[n++] = pool_row(a, &a->ori_kv, &a->ori_block_table, d->BSW, k->b, p);
    if (a->cmp_mode == DSOPS_CMP_DENSE) {
        for (int64_t e = 0; e < k->n; e++)
            rows[n++] = pool_row(a, &a->cmp_kv, &a->cmp_block_table, d->BSC, k->b, e);
    } else if (a->cmp_mode == DSOPS_CMP_SPARSE) {
        for (int64_t j = 0; j < k->n; j++) {
            int64_t idx = i32_at2(&a->cmp_indices, t, j);
            if (idx >= 0 && idx < k->nc_valid)
                rows[n++] = pool_row(a, &a->cmp_kv, &a->cmp_block_table, d->BSC, k->b, idx);
        }
    }
    return n;
}

dsops_status dsops_sas(dsops_context *ctx, const sas_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    sas_dims d;
    int64_t nmax = 0;
    DSOPS_TRY(check_shapes(a, &d));
    DSOPS_TRY(check_indices(a, &d, &nmax));
    dsops_clear_error();
    if (d.T == 0)
        return DSOPS_OK;

    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    const dsops_kernel_table *kt = dsops_kernel_table_get(use->isa);
    int threads = use->threads;
    int64_t chunk_heads, chunks, items = dsops_attn_plan_items(d.T, d.N, &threads, &chunk_heads, &chunks);

    int64_t list_max = nmax > 0 ? nmax : 1;
    dsops_attn_shape shape = {(int)d.D, (int)d.D, (int)list_max, (int)chunk_heads, a->p_mode, a->p_tile,
                              d.window ? a->win_size : 0};
    int qw = dsops_attn_q_width(shape.dqk);
    size_t qbuf_bytes = dsops_align64((size_t)chunk_heads * (size_t)qw * 2);
    size_t rows_bytes = dsops_align64((size_t)list_max * sizeof(sas_row));
    size_t per_thread = dsops_attn_scratch_bytes(&shape) + qbuf_bytes + rows_bytes;
    char *scratch = dsops_scratch(use, per_thread * (size_t)threads);
    if (!scratch) {
        dsops_context_end(ctx, use);
        return DSOPS_ERR_NOMEM;
    }

#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t item = 0; item < items; item++) {
        char *mine = scratch + per_thread * (size_t)dsops_thread_num();
        uint16_t *qbuf = (uint16_t *)mine;                                    /* [chunk_heads][qw] */
        sas_row *rows = (sas_row *)(mine + qbuf_bytes);                       /* [list_max] */
        void *core_scratch = mine + qbuf_bytes + rows_bytes;
        int64_t t = item / chunks, h0 = (item % chunks) * chunk_heads;
        int64_t nh = d.N - h0 < chunk_heads ? d.N - h0 : chunk_heads;
        sas_token k = token_plan(a, &d, t);
        int n = collect_rows(a, &d, &k, t, rows);
        for (int64_t h = 0; h < nh; h++) {
            uint16_t *qh = qbuf + (size_t)h * (size_t)qw;
            memcpy(qh, dsops_at3(&a->q, t, h0 + h, 0), (size_t)d.D * 2);
            if (qw > shape.dqk)
                qh[shape.dqk] = 0;
        }
        const bool model1 = a->pool_layout == DSOPS_SAS_POOL_MODEL1_FP8;
        sas_rows src = {rows, model1 ? (size_t)MODEL1_BODY : (size_t)d.D * 2, &kt->attn};
        dsops_attn_keys keys = {model1 ? row_model1 : row_copy, row_prefetch, &src};
        dsops_attn_shape sh = shape;
        sh.nh = (int)nh;
        dsops_attn_call call = {
            .q = qbuf,
            .q_stride = (size_t)qw,
            .scale = a->softmax_scale,
            .out = (uint16_t *)dsops_at3(&a->out, t, h0, 0),
            .out_stride = (size_t)a->out.stride[1],
            .p_first = (int)k.w,
        };
        dsops_attn_bind_heads(&call, &a->sinks, &a->lse, &a->max_logits, t, h0);
        dsops_attn_run(&kt->attn, &sh, &call, n, &keys, core_scratch);
    }
    dsops_context_end(ctx, use);
    return DSOPS_OK;
}
