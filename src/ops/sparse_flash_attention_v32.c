/* sparse_flash_attention_v32 (spec §4.4): validate -> plan work items (token x head chunk) ->
 * per item, build the used-index list and run the attention core. */
#include <math.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attention_core.h"
#include "sequences.h"
#include "stages.h"
#include "internal.h"

#define PACKED656_ROW 656

typedef dsops_sparse_flash_attention_v32_args sfa_args;

dsops_status dsops_sparse_flash_attention_v32_init(sfa_args *a, dsops_preset preset)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    /* 192^-0.5 * mscale^2 with mscale = 0.1 ln 40 + 1 (YaRN factor 40) */
    double mscale = 0.1 * log(40.0) + 1.0;
    a->softmax_scale = (float)(mscale * mscale / sqrt(192.0));
    a->p_mode = DSOPS_P_NORMALISED;
    a->p_tile = 128;
    a->kv_layout = DSOPS_KV_SPLIT_BF16;
    if (preset != DSOPS_PRESET_V32)
        return dsops_fail(DSOPS_ERR_PARAM, "preset = %d: sparse_flash_attention_v32 exists only for DSOPS_PRESET_V32",
                          (int)preset);
    dsops_clear_error();
    return DSOPS_OK;
}

/* ---- validation ------------------------------------------------------------------------------ */

typedef struct sfa_dims {
    int64_t T, N, Dc, Dr, K, B, MB, NB, BS;
} sfa_dims;

/* The layouts whose rows are one 656-byte kv_packed row: packed_int8 and FlashMLA's FP8 row (spec §2.12). */
static bool packed_row(dsops_kv_layout l) { return l == DSOPS_KV_PACKED_INT8 || l == DSOPS_KV_FLASHMLA_FP8; }

static const char *packed_name(dsops_kv_layout l) { return l == DSOPS_KV_PACKED_INT8 ? "packed_int8" : "flashmla_fp8"; }

static int32_t i32_at2(const dsops_tensor *t, int64_t i, int64_t j) { return *(const int32_t *)dsops_at2(t, i, j); }

static dsops_status check_shapes(const sfa_args *a, sfa_dims *d)
{
    const unsigned bf16 = DSOPS_DT(DSOPS_BF16), i32 = DSOPS_DT(DSOPS_INT32);
    if ((int)a->kv_layout < 0 || (int)a->kv_layout > DSOPS_KV_FLASHMLA_FP8)
        return dsops_fail(DSOPS_ERR_PARAM, "kv_layout = %d is not a dsops_kv_layout value", (int)a->kv_layout);
    if ((int)a->p_mode < 0 || (int)a->p_mode > DSOPS_P_FP32)
        return dsops_fail(DSOPS_ERR_PARAM, "p_mode = %d is not a dsops_p_mode value", (int)a->p_mode);
    DSOPS_TRY(dsops_check_tensor(&a->q_nope, "q_nope", 3, bf16, true));
    DSOPS_TRY(dsops_check_tensor(&a->q_rope, "q_rope", 3, bf16, true));
    d->T = a->q_nope.shape[0];
    d->N = a->q_nope.shape[1];
    d->Dc = a->q_nope.shape[2];
    d->Dr = a->q_rope.shape[2];
    DSOPS_TRY(dsops_check_dim(&a->q_rope, "q_rope", 0, d->T, "T of q_nope"));
    DSOPS_TRY(dsops_check_dim(&a->q_rope, "q_rope", 1, d->N, "N of q_nope"));
    if (d->N < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "q_nope.shape[1] = %lld heads, expected >= 1", (long long)d->N);
    if (d->Dc < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "q_nope.shape[2] = %lld (Dc), expected >= 1", (long long)d->Dc);
    if (d->Dr < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "q_rope.shape[2] = %lld (Dr), expected >= 1", (long long)d->Dr);
    /* implementation limits (far above any model): 32-bit loop counters and bounded scratch */
    if (d->N > (1 << 20))
        return dsops_fail(DSOPS_ERR_UNSUPPORTED, "q_nope.shape[1] = %lld heads, this build supports at most 2^20",
                          (long long)d->N);
    if (d->Dc > 65536 || d->Dr > 65536)
        return dsops_fail(DSOPS_ERR_UNSUPPORTED, "Dc = %lld, Dr = %lld: this build supports at most 65536 each",
                          (long long)d->Dc, (long long)d->Dr);

    const dsops_tensor *cache0;
    const char *cache0_name;
    if (packed_row(a->kv_layout)) {
        const char *layout = packed_name(a->kv_layout);
        DSOPS_TRY(dsops_check_tensor(&a->kv_packed, "kv_packed", 3, DSOPS_DT(DSOPS_UINT8), true));
        DSOPS_TRY(dsops_check_dim(&a->kv_packed, "kv_packed", 2, PACKED656_ROW, "bytes of a 656-byte row"));
        if (d->Dc != 512)
            return dsops_fail(DSOPS_ERR_SHAPE, "q_nope.shape[2] = %lld, expected 512 (%s layout)", (long long)d->Dc,
                              layout);
        if (d->Dr != 64)
            return dsops_fail(DSOPS_ERR_SHAPE, "q_rope.shape[2] = %lld, expected 64 (%s layout)", (long long)d->Dr,
                              layout);
        cache0 = &a->kv_packed;
        cache0_name = "kv_packed";
    } else {
        bool int8 = a->kv_layout == DSOPS_KV_SPLIT_INT8;
        DSOPS_TRY(dsops_check_tensor(&a->key_nope, "key_nope", 3, DSOPS_DT(int8 ? DSOPS_INT8 : DSOPS_BF16), true));
        DSOPS_TRY(dsops_check_tensor(&a->key_rope, "key_rope", 3, bf16, true));
        cache0 = &a->key_nope;
        cache0_name = "key_nope";
        DSOPS_TRY(dsops_check_dim(&a->key_nope, "key_nope", 2, d->Dc, "Dc of q_nope"));
        DSOPS_TRY(dsops_check_dim(&a->key_rope, "key_rope", 0, a->key_nope.shape[0], "NB of key_nope"));
        DSOPS_TRY(dsops_check_dim(&a->key_rope, "key_rope", 1, a->key_nope.shape[1], "BS of key_nope"));
        DSOPS_TRY(dsops_check_dim(&a->key_rope, "key_rope", 2, d->Dr, "Dr of q_rope"));
        if (int8) {
            if (d->Dc % 128 != 0)
                return dsops_fail(DSOPS_ERR_SHAPE, "q_nope.shape[2] = %lld, expected a multiple of 128 (split_int8 layout)",
                                  (long long)d->Dc);
            DSOPS_TRY(dsops_check_tensor(&a->key_nope_scale, "key_nope_scale", 3, DSOPS_DT(DSOPS_FP32), true));
            DSOPS_TRY(dsops_check_dim(&a->key_nope_scale, "key_nope_scale", 0, a->key_nope.shape[0], "NB of key_nope"));
            DSOPS_TRY(dsops_check_dim(&a->key_nope_scale, "key_nope_scale", 1, a->key_nope.shape[1], "BS of key_nope"));
            DSOPS_TRY(dsops_check_dim(&a->key_nope_scale, "key_nope_scale", 2, d->Dc / 128, "Dc / 128"));
        }
    }
    d->NB = cache0->shape[0];
    d->BS = cache0->shape[1];
    if (d->NB < 1 || d->NB > INT32_MAX)
        return dsops_fail(DSOPS_ERR_SHAPE, "%s.shape[0] = %lld blocks, expected in [1, 2^31)", cache0_name, (long long)d->NB);
    if (d->BS < 1 || d->BS > INT32_MAX)
        return dsops_fail(DSOPS_ERR_SHAPE, "%s.shape[1] = %lld (block size), expected in [1, 2^31)", cache0_name,
                          (long long)d->BS);

    DSOPS_TRY(dsops_check_topk_tensor(&a->topk_indices, "topk_indices", d->T, "T of q_nope", &d->K));
    if (dsops_tensor_present(&a->topk_length)) {
        DSOPS_TRY(dsops_check_tensor(&a->topk_length, "topk_length", 1, i32, false));
        DSOPS_TRY(dsops_check_dim(&a->topk_length, "topk_length", 0, d->T, "T of q_nope"));
    }
    DSOPS_TRY(dsops_check_sequence_tensors(&a->cu_seqlens_q, &a->seqused_kv, &a->block_table, &d->B, &d->MB));

    DSOPS_TRY(dsops_check_tensor(&a->out, "out", 3, bf16, true));
    DSOPS_TRY(dsops_check_dim(&a->out, "out", 0, d->T, "T of q_nope"));
    DSOPS_TRY(dsops_check_dim(&a->out, "out", 1, d->N, "N of q_nope"));
    DSOPS_TRY(dsops_check_dim(&a->out, "out", 2, d->Dc, "Dc of q_nope"));
    return dsops_attn_check_heads(&a->sinks, &a->lse, &a->max_logits, d->T, d->N, "q_nope");
}

static dsops_status check_params(const sfa_args *a)
{
    if (!isfinite(a->softmax_scale))
        return dsops_fail(DSOPS_ERR_PARAM, "softmax_scale = %g is not finite", (double)a->softmax_scale);
    if (a->p_mode == DSOPS_P_TILED && a->p_tile < 1)
        return dsops_fail(DSOPS_ERR_PARAM, "p_tile = %d, expected >= 1 (p_mode tiled)", a->p_tile);
    return DSOPS_OK;
}

static dsops_status check_aliasing(const sfa_args *a)
{
    const dsops_named_tensor outs[] = {{&a->out, "out"}, {&a->lse, "lse"}, {&a->max_logits, "max_logits"}};
    const dsops_named_tensor ins[] = {{&a->q_nope, "q_nope"}, {&a->q_rope, "q_rope"}, {&a->key_nope, "key_nope"},
                                      {&a->key_nope_scale, "key_nope_scale"}, {&a->key_rope, "key_rope"},
                                      {&a->kv_packed, "kv_packed"}, {&a->topk_indices, "topk_indices"},
                                      {&a->topk_length, "topk_length"}, {&a->sinks, "sinks"},
                                      {&a->block_table, "block_table"},
                                      {&a->cu_seqlens_q, "cu_seqlens_q"}, {&a->seqused_kv, "seqused_kv"}};
    return dsops_check_outputs_apart(outs, sizeof outs / sizeof outs[0], ins, sizeof ins / sizeof ins[0]);
}

/* Sequence descriptors (V6) and every used index's block-table entry (V7). */
static dsops_status check_indices(const sfa_args *a, const sfa_dims *d)
{
    DSOPS_TRY(dsops_check_sequence_values(&a->cu_seqlens_q, &a->seqused_kv, "seqused_kv", d->B, d->T));
    for (int64_t b = 0; b < d->B; b++) {
        int32_t lo = dsops_i32_at(&a->cu_seqlens_q, b), hi = dsops_i32_at(&a->cu_seqlens_q, b + 1);
        int64_t used = dsops_i32_at(&a->seqused_kv, b), S = hi - lo;
        for (int64_t t = lo; t < hi; t++) {
            int64_t L = used - (S - 1 - (t - lo));
            int64_t cnt = d->K < L ? d->K : L;
            if (cnt < 0)
                cnt = 0;
            if (dsops_tensor_present(&a->topk_length)) {
                int32_t tl = dsops_i32_at(&a->topk_length, t);
                if (tl < 0)
                    return dsops_fail(DSOPS_ERR_INDEX, "topk_length[%lld] = %d is negative", (long long)t, tl);
                if (tl < cnt)
                    cnt = tl;
            }
            for (int64_t j = 0; j < cnt; j++) {
                int64_t idx = i32_at2(&a->topk_indices, t, j);
                if (idx < 0 || idx >= used)
                    continue;
                int64_t col = idx / d->BS;
                if (col >= d->MB)
                    return dsops_fail(DSOPS_ERR_INDEX,
                                      "topk_indices[%lld][%lld] = %lld needs block_table column %lld, outside [0, %lld)",
                                      (long long)t, (long long)j, (long long)idx, (long long)col, (long long)d->MB);
                int32_t blk = i32_at2(&a->block_table, b, col);
                if (blk < 0 || blk >= d->NB)
                    return dsops_fail(DSOPS_ERR_INDEX,
                                      "block_table[%lld][%lld] = %d is outside [0, %lld) (needed by topk_indices[%lld][%lld] = %lld)",
                                      (long long)b, (long long)col, blk, (long long)d->NB, (long long)t, (long long)j,
                                      (long long)idx);
            }
        }
    }
    return DSOPS_OK;
}

/* ---- execution ------------------------------------------------------------------------------- */

/* Cache addresses of one used index: latent (bf16 or int8), rope (bf16), int8 group scales (fp32).
 * For packed_int8 rows all three point into the one 656-byte row. */
typedef struct sfa_row_ptrs {
    const void *nope;
    const uint16_t *rope;
    const void *scales;
} sfa_row_ptrs;

typedef struct sfa_rows {
    const dsops_attention_kernels *k;
    const sfa_row_ptrs *ptr;  /* [n] */
    int Dc, Dr;
    size_t nope_bytes;        /* bytes of one latent row */
} sfa_rows;

static void row_split_bf16(const void *src, int j, uint16_t *dst)
{
    const sfa_rows *r = src;
    memcpy(dst, r->ptr[j].nope, (size_t)r->Dc * 2);
    memcpy(dst + r->Dc, r->ptr[j].rope, (size_t)r->Dr * 2);
}

static void row_int8(const void *src, int j, uint16_t *dst)
{
    const sfa_rows *r = src;
    r->k->dequant_int8((const int8_t *)r->ptr[j].nope, r->ptr[j].scales, r->Dc, dst);
    memcpy(dst + r->Dc, r->ptr[j].rope, (size_t)r->Dr * 2);
}

static void row_e4m3(const void *src, int j, uint16_t *dst)
{
    const sfa_rows *r = src;
    r->k->dequant_e4m3((const uint8_t *)r->ptr[j].nope, r->ptr[j].scales, 128, r->Dc, dst);
    memcpy(dst + r->Dc, r->ptr[j].rope, (size_t)r->Dr * 2);
}

static void prefetch_bytes(const void *p, size_t bytes)
{
    const char *c = p;
    for (size_t off = 0; off < bytes; off += 64)
        __builtin_prefetch(c + off, 0, 2);
    __builtin_prefetch(c + bytes - 1, 0, 2);
}

static void prefetch_row(const void *src, int j)
{
    const sfa_rows *r = src;
    prefetch_bytes(r->ptr[j].nope, r->nope_bytes);
    prefetch_bytes(r->ptr[j].rope, (size_t)r->Dr * 2);
    if (r->ptr[j].scales)
        __builtin_prefetch(r->ptr[j].scales, 0, 2);
}

/* Resolves token t's used indices to cache addresses; returns their count. */
static int collect_rows(const sfa_args *a, const sfa_dims *d, int64_t b, int64_t t, int64_t L, sfa_row_ptrs *rows)
{
    int64_t used = dsops_i32_at(&a->seqused_kv, b);
    int64_t cnt = d->K < L ? d->K : L;
    if (cnt < 0)
        cnt = 0;
    if (dsops_tensor_present(&a->topk_length) && dsops_i32_at(&a->topk_length, t) < cnt)
        cnt = dsops_i32_at(&a->topk_length, t);
    int n = 0;
    for (int64_t j = 0; j < cnt; j++) {
        int64_t idx = i32_at2(&a->topk_indices, t, j);
        if (idx < 0 || idx >= used)
            continue;
        int64_t blk = i32_at2(&a->block_table, b, idx / d->BS), off = idx % d->BS;
        sfa_row_ptrs *p = &rows[n++];
        if (a->kv_layout == DSOPS_KV_PACKED_INT8) {
            const uint8_t *row = dsops_at3(&a->kv_packed, blk, off, 0); /* [656] */
            p->nope = row;
            p->rope = (const uint16_t *)(row + 512);
            p->scales = row + 640;
        } else if (a->kv_layout == DSOPS_KV_FLASHMLA_FP8) {
            const uint8_t *row = dsops_at3(&a->kv_packed, blk, off, 0); /* [656]: e4m3 | scales | rope */
            p->nope = row;
            p->scales = row + 512;
            p->rope = (const uint16_t *)(row + 528);
        } else {
            p->nope = dsops_at3(&a->key_nope, blk, off, 0);
            p->rope = dsops_at3(&a->key_rope, blk, off, 0);
            p->scales = a->kv_layout == DSOPS_KV_SPLIT_INT8 ? dsops_at3(&a->key_nope_scale, blk, off, 0) : NULL;
        }
    }
    return n;
}

dsops_status dsops_sfa_v32_validate(const sfa_args *a, bool with_indices)
{
    sfa_dims d;
    DSOPS_TRY(check_shapes(a, &d));
    DSOPS_TRY(check_params(a));
    DSOPS_TRY(check_aliasing(a));
    return with_indices ? check_indices(a, &d) : DSOPS_OK;
}

dsops_status dsops_sparse_flash_attention_v32(dsops_context *ctx, const sfa_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    sfa_dims d;
    DSOPS_TRY(check_shapes(a, &d));
    DSOPS_TRY(check_params(a));
    DSOPS_TRY(check_aliasing(a));
    DSOPS_TRY(check_indices(a, &d));
    dsops_clear_error();
    if (d.T == 0)
        return DSOPS_OK;

    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    const dsops_kernel_table *kt = dsops_kernel_table_get(use->isa);
    int threads = use->threads;

    int64_t chunk_heads, chunks, items = dsops_attn_plan_items(d.T, d.N, &threads, &chunk_heads, &chunks);

    dsops_attn_shape shape = {(int)(d.Dc + d.Dr), (int)d.Dc, (int)d.K, (int)chunk_heads, a->p_mode, a->p_tile, 0};
    int qw = dsops_attn_q_width(shape.dqk);
    size_t qbuf_bytes = dsops_align64((size_t)chunk_heads * qw * 2);
    size_t rows_bytes = dsops_align64((size_t)d.K * sizeof(sfa_row_ptrs));
    size_t per_thread = dsops_attn_scratch_bytes(&shape) + qbuf_bytes + rows_bytes;
    char *scratch = dsops_scratch(use, per_thread * (size_t)threads);
    if (!scratch) {
        dsops_context_end(ctx, use);
        return DSOPS_ERR_NOMEM;
    }
    /* token -> sequence map, built on the fly per item from cu_seqlens_q (binary search) */
    const dsops_tensor *cu = &a->cu_seqlens_q;

#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t item = 0; item < items; item++) {
        int tid = dsops_thread_num();
        char *mine = scratch + per_thread * (size_t)tid;
        uint16_t *qbuf = (uint16_t *)mine;                     /* [chunk_heads][qw] */
        sfa_row_ptrs *rows = (sfa_row_ptrs *)(mine + qbuf_bytes); /* [K] */
        void *core_scratch = mine + qbuf_bytes + rows_bytes;
        int64_t t = item / chunks, h0 = (item % chunks) * chunk_heads;
        int64_t nh = d.N - h0 < chunk_heads ? d.N - h0 : chunk_heads;
        int64_t b, S, i;
        dsops_token_of(cu, d.B, t, &b, &S, &i);
        int64_t L = (int64_t)dsops_i32_at(&a->seqused_kv, b) - (S - 1 - i);
        int n = collect_rows(a, &d, b, t, L, rows);

        for (int64_t h = 0; h < nh; h++) {
            uint16_t *qh = qbuf + (size_t)h * qw;
            memcpy(qh, dsops_at3(&a->q_nope, t, h0 + h, 0), (size_t)d.Dc * 2);
            memcpy(qh + d.Dc, dsops_at3(&a->q_rope, t, h0 + h, 0), (size_t)d.Dr * 2);
            if (qw > shape.dqk)
                qh[shape.dqk] = 0;
        }
        sfa_rows src = {&kt->attn, rows, (int)d.Dc, (int)d.Dr,
                        (size_t)d.Dc * (a->kv_layout == DSOPS_KV_SPLIT_BF16 ? 2 : 1)};
        dsops_attn_keys keys = {a->kv_layout == DSOPS_KV_SPLIT_BF16       ? row_split_bf16
                                : a->kv_layout == DSOPS_KV_FLASHMLA_FP8 ? row_e4m3
                                                                        : row_int8,
                                prefetch_row, &src};
        dsops_attn_shape sh = shape;
        sh.nh = (int)nh;
        dsops_attn_call call = {
            .q = qbuf,
            .q_stride = (size_t)qw,
            .scale = a->softmax_scale,
            .out = (uint16_t *)dsops_at3(&a->out, t, h0, 0),
            .out_stride = (size_t)a->out.stride[1],
        };
        dsops_attn_bind_heads(&call, &a->sinks, &a->lse, &a->max_logits, t, h0);
        dsops_attn_run(&kt->attn, &sh, &call, n, &keys, core_scratch);
    }
    dsops_context_end(ctx, use);
    return DSOPS_OK;
}
