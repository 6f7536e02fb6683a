/* sparse_attention_v32 (spec §4.5): the V3.2 attention layer as the four stand-alone operators in
 * sequence, every stage validated before the first write. Intermediates (queries, indexer queries and
 * weights, top-k) live in the context's outer scratch, apart from the stages' own scratch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "linear.h"
#include "primitives.h"
#include "stages.h"

typedef dsops_sparse_attention_v32_args dia_args;

#define DR 64

dsops_status dsops_sparse_attention_v32_init(dia_args *a, dsops_preset preset)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    dsops_mla_prolog_v32_args m;
    dsops_indexer_prolog_v32_args ip;
    dsops_sparse_flash_attention_v32_args f;
    dsops_status s = dsops_mla_prolog_v32_init(&m, preset);
    dsops_indexer_prolog_v32_init(&ip, DSOPS_PRESET_V32);
    dsops_sparse_flash_attention_v32_init(&f, DSOPS_PRESET_V32);
    a->mla_eps_cq = m.eps_cq;
    a->mla_eps_ckv = m.eps_ckv;
    a->mla_rope_mode = m.rope_mode;
    a->mla_rope_inverse = m.rope_inverse;
    a->kv_layout = m.kv_layout;
    a->idx_ln_eps = ip.ln_eps;
    a->weights_scale = ip.weights_scale;
    a->idx_rope_mode = ip.rope_mode;
    a->idx_rope_inverse = ip.rope_inverse;
    a->softmax_scale = f.softmax_scale;
    a->p_mode = f.p_mode;
    a->p_tile = f.p_tile;
    a->topk = 2048;
    if (s != DSOPS_OK)
        return dsops_fail(DSOPS_ERR_PARAM, "preset = %d: sparse_attention_v32 exists only for DSOPS_PRESET_V32",
                          (int)preset);
    dsops_clear_error();
    return DSOPS_OK;
}

/* The four stages' arguments over the fused arguments and the intermediates. */
typedef struct dia_stages {
    dsops_mla_prolog_v32_args mla;
    dsops_indexer_prolog_v32_args idx;
    dsops_lightning_indexer_args li;
    dsops_sparse_flash_attention_v32_args sfa;
} dia_stages;

typedef struct dia_dims {
    int64_t T, N, Dc, Q, NI, DI, K;
    bool int8;
} dia_dims;

/* Shapes the intermediates need, from the weights (each stage re-checks them in full). */
static dsops_status derive_dims(const dia_args *a, dia_dims *d)
{
    if (!a->x.data || !a->w_uk.data || !a->wq_a.data || !a->wq_b.data || !a->idx_wq_b.data || !a->idx_wk.data)
        return dsops_fail(DSOPS_ERR_NULL, "%s is NULL (required)",
                          !a->x.data      ? "x"
                          : !a->w_uk.data ? "w_uk"
                          : !a->wq_a.data ? "wq_a"
                          : !a->wq_b.data ? "wq_b"
                          : !a->idx_wq_b.data ? "idx_wq_b"
                                              : "idx_wk");
    if (a->x.ndim != 2 || a->w_uk.ndim != 3 || a->wq_a.ndim != 2 || a->idx_wk.ndim != 2)
        return dsops_fail(DSOPS_ERR_SHAPE, "x, wq_a, idx_wk must have rank 2 and w_uk rank 3 (got %d, %d, %d, %d)",
                          a->x.ndim, a->wq_a.ndim, a->idx_wk.ndim, a->w_uk.ndim);
    d->T = a->x.shape[0];
    d->N = a->w_uk.shape[0];
    d->Dc = a->w_uk.shape[2];
    d->Q = a->wq_a.shape[0];
    d->DI = a->idx_wk.shape[0];
    d->NI = d->DI > 0 && a->idx_wq_b.ndim == 2 ? a->idx_wq_b.shape[0] / d->DI : 0;
    d->K = a->topk;
    d->int8 = a->wq_b.dtype == DSOPS_INT8;
    /* one variant for the whole layer: the MLA prolog's qr feeds the indexer prolog */
    if (a->idx_wq_b.dtype != a->wq_b.dtype)
        return dsops_fail(DSOPS_ERR_DTYPE, "idx_wq_b has dtype %s, expected %s (the variant of wq_b)",
                          dsops_dtype_name(a->idx_wq_b.dtype), dsops_dtype_name(a->wq_b.dtype));
    if (d->K < 1)
        return dsops_fail(DSOPS_ERR_PARAM, "topk = %d, expected >= 1", a->topk);
    if (d->K > (1 << 24))
        return dsops_fail(DSOPS_ERR_UNSUPPORTED, "topk = %d, this build supports at most 2^24", a->topk);
    if (dsops_tensor_present(&a->topk_indices)) {
        DSOPS_TRY(dsops_check_tensor(&a->topk_indices, "topk_indices", 2, DSOPS_DT(DSOPS_INT32), false));
        DSOPS_TRY(dsops_check_dim(&a->topk_indices, "topk_indices", 0, d->T, "T of x"));
        DSOPS_TRY(dsops_check_dim(&a->topk_indices, "topk_indices", 1, d->K, "topk"));
    }
    /* one block table for every cache: the latent and indexer caches must have the same blocks, else a block that
     * stage 3 accepts could be out of range in stage 4, after stages 1-3 wrote */
    const bool packed = a->kv_layout == DSOPS_KV_PACKED_INT8 || a->kv_layout == DSOPS_KV_FLASHMLA_FP8;
    const dsops_tensor *latent = packed ? &a->kv_packed : &a->kv_cache;
    const char *lname = packed ? "kv_packed" : "kv_cache";
    if (latent->data && a->idx_k_cache.data && latent->ndim == 3 && a->idx_k_cache.ndim == 3 &&
        (latent->shape[0] != a->idx_k_cache.shape[0] || latent->shape[1] != a->idx_k_cache.shape[1]))
        return dsops_fail(DSOPS_ERR_SHAPE,
                          "%s has %lld blocks of %lld rows, idx_k_cache %lld of %lld: the caches share block_table "
                          "and must have the same NB and BS",
                          lname, (long long)latent->shape[0], (long long)latent->shape[1],
                          (long long)a->idx_k_cache.shape[0], (long long)a->idx_k_cache.shape[1]);
    if (d->T < 0 || d->N < 1 || d->Dc < 1 || d->Q < 1 || d->DI < 1 || d->NI < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "x / w_uk / wq_a / idx_wq_b / idx_wk give T = %lld, N = %lld, Dc = %lld, "
                                           "Q = %lld, NI = %lld, DI = %lld; expected every extent >= 1",
                          (long long)d->T, (long long)d->N, (long long)d->Dc, (long long)d->Q, (long long)d->NI,
                          (long long)d->DI);
    return DSOPS_OK;
}

/* Byte offsets of the intermediates in the outer scratch. */
typedef struct dia_layout {
    size_t q_nope, q_rope, qr, qr_scale, q_idx, q_idx_scale, weights, topk, slots, total;
} dia_layout;

/* Appends a block of a * b * c elements of `bytes` bytes (extents >= 0) at *off, 64-byte aligned; false when the
 * sizes overflow. */
static bool layout_block(size_t *at, size_t *off, int64_t a, int64_t b, int64_t c, size_t bytes)
{
    size_t n;
    if (a < 0 || b < 0 || c < 0 || __builtin_mul_overflow((size_t)a, (size_t)b, &n) ||
        __builtin_mul_overflow(n, (size_t)c, &n) || __builtin_mul_overflow(n, bytes, &n) || n > SIZE_MAX / 4 ||
        *off > SIZE_MAX / 4)
        return false;
    *at = *off;
    *off += dsops_align64(n);
    return true;
}

/* The intermediates' layout; false when it does not fit in memory's sizes. The extents come from tensors that the
 * stages validate only after this (x broadcast over a huge T, say), so every size is checked here. */
static bool make_layout(const dia_dims *d, dia_layout *L)
{
    size_t off = 0, act = d->int8 ? 1 : 2;
    const int64_t T = d->T;
    const bool fits =
        layout_block(&L->q_nope, &off, T, d->N, d->Dc, 2) && layout_block(&L->q_rope, &off, T, d->N, DR, 2) &&
        layout_block(&L->qr, &off, T, d->Q, 1, act) && layout_block(&L->qr_scale, &off, T, 1, 1, 4) &&
        layout_block(&L->q_idx, &off, T, d->NI, d->DI, act) && layout_block(&L->q_idx_scale, &off, T, d->NI, 1, 2) &&
        layout_block(&L->weights, &off, T, d->NI, 1, 2) && layout_block(&L->topk, &off, T, d->K, 1, 4) &&
        layout_block(&L->slots, &off, T > 0 ? T : 1, 1, 1, dsops_cache_slots_scratch_bytes(1));
    L->total = off;
    return fits;
}

/* make_layout or DSOPS_ERR_SHAPE (an overflowing size, V3). */
static dsops_status layout_or_fail(const dia_dims *d, dia_layout *L)
{
    if (make_layout(d, L))
        return DSOPS_OK;
    return dsops_fail(DSOPS_ERR_SHAPE,
                      "the intermediates of T = %lld tokens, N = %lld, Dc = %lld, Q = %lld, NI = %lld, DI = %lld, "
                      "topk = %lld overflow the address space",
                      (long long)d->T, (long long)d->N, (long long)d->Dc, (long long)d->Q, (long long)d->NI,
                      (long long)d->DI, (long long)d->K);
}

/* buf NULL (preparing weights): the intermediates stay absent. */
static dsops_tensor intermediate(char *buf, size_t off, dsops_dtype dt, int ndim, const int64_t *shape)
{
    return buf ? dsops_tensor_make(buf + off, dt, ndim, shape) : (dsops_tensor){0};
}

static void build_stages(const dia_args *a, const dia_dims *d, const dia_layout *L, char *buf, dia_stages *st)
{
    dsops_dtype act = d->int8 ? DSOPS_INT8 : DSOPS_BF16;
    int64_t sqn[3] = {d->T, d->N, d->Dc}, sqr[3] = {d->T, d->N, DR}, sq[2] = {d->T, d->Q}, st1[1] = {d->T},
            sqi[3] = {d->T, d->NI, d->DI}, sni[2] = {d->T, d->NI}, sk[2] = {d->T, d->K};
    dsops_tensor q_nope = intermediate(buf, L->q_nope, DSOPS_BF16, 3, sqn);
    dsops_tensor q_rope = intermediate(buf, L->q_rope, DSOPS_BF16, 3, sqr);
    dsops_tensor qr = intermediate(buf, L->qr, act, 2, sq);
    dsops_tensor qr_scale = d->int8 ? intermediate(buf, L->qr_scale, DSOPS_FP32, 1, st1) : (dsops_tensor){0};
    dsops_tensor q_idx = intermediate(buf, L->q_idx, act, 3, sqi);
    dsops_tensor q_idx_scale = d->int8 ? intermediate(buf, L->q_idx_scale, DSOPS_FP16, 2, sni) : (dsops_tensor){0};
    dsops_tensor weights = intermediate(buf, L->weights, d->int8 ? DSOPS_FP16 : DSOPS_BF16, 2, sni);
    dsops_tensor topk = dsops_tensor_present(&a->topk_indices) ? a->topk_indices
                                                                : intermediate(buf, L->topk, DSOPS_INT32, 2, sk);
    const dsops_prepared *p = a->prepared;

    dsops_mla_prolog_v32_args *m = &st->mla;
    memset(m, 0, sizeof *m);
    m->x = a->x;
    m->wq_a = a->wq_a;
    m->gamma_cq = a->gamma_cq;
    m->wq_b = a->wq_b;
    m->wq_b_scale = a->wq_b_scale;
    m->w_uk = a->w_uk;
    m->wkv_a = a->wkv_a;
    m->gamma_ckv = a->gamma_ckv;
    m->rope_cos = a->rope_cos;
    m->rope_sin = a->rope_sin;
    m->cache_index = a->cache_index;
    m->kv_cache = a->kv_cache;
    m->kv_scale_cache = a->kv_scale_cache;
    m->kr_cache = a->kr_cache;
    m->kv_packed = a->kv_packed;
    m->q_nope = q_nope;
    m->q_rope = q_rope;
    m->qr = qr;
    m->qr_scale = qr_scale;
    m->eps_cq = a->mla_eps_cq;
    m->eps_ckv = a->mla_eps_ckv;
    m->rope_mode = a->mla_rope_mode;
    m->rope_inverse = a->mla_rope_inverse;
    m->kv_layout = a->kv_layout;
    m->prepared = p ? p->parts[0] : NULL;

    dsops_indexer_prolog_v32_args *ip = &st->idx;
    memset(ip, 0, sizeof *ip);
    ip->x = a->x;
    ip->qr = qr;
    ip->qr_scale = qr_scale;
    ip->idx_wq_b = a->idx_wq_b;
    ip->idx_wq_b_scale = a->idx_wq_b_scale;
    ip->idx_wk = a->idx_wk;
    ip->weights_proj = a->weights_proj;
    ip->ln_gamma_k = a->ln_gamma_k;
    ip->ln_beta_k = a->ln_beta_k;
    ip->rope_cos = a->rope_cos;
    ip->rope_sin = a->rope_sin;
    ip->hadamard_q = a->hadamard_q;
    ip->hadamard_k = a->hadamard_k;
    ip->cache_index = a->cache_index;
    ip->idx_k_cache = a->idx_k_cache;
    ip->idx_k_scale_cache = a->idx_k_scale_cache;
    ip->q_idx = q_idx;
    ip->q_idx_scale = q_idx_scale;
    ip->weights = weights;
    ip->ln_eps = a->idx_ln_eps;
    ip->weights_scale = a->weights_scale;
    ip->rope_mode = a->idx_rope_mode;
    ip->rope_inverse = a->idx_rope_inverse;
    ip->prepared = p ? p->parts[1] : NULL;

    dsops_lightning_indexer_args *li = &st->li;
    memset(li, 0, sizeof *li);
    li->q_idx = q_idx;
    li->q_idx_scale = q_idx_scale;
    li->weights = weights;
    li->key_cache = a->idx_k_cache;
    li->key_scale_cache = a->idx_k_scale_cache;
    li->block_table = a->block_table;
    li->cu_seqlens_q = a->cu_seqlens_q;
    li->seqused_kv = a->seqused_kv;
    li->topk_indices = topk;
    li->cmp_ratio = 1;

    dsops_sparse_flash_attention_v32_args *f = &st->sfa;
    memset(f, 0, sizeof *f);
    f->q_nope = q_nope;
    f->q_rope = q_rope;
    f->key_nope = a->kv_cache;
    f->key_nope_scale = a->kv_scale_cache;
    f->key_rope = a->kr_cache;
    f->kv_packed = a->kv_packed;
    f->topk_indices = topk;
    f->block_table = a->block_table;
    f->cu_seqlens_q = a->cu_seqlens_q;
    f->seqused_kv = a->seqused_kv;
    f->out = a->out;
    f->lse = a->lse;
    f->softmax_scale = a->softmax_scale;
    f->p_mode = a->p_mode;
    f->p_tile = a->p_tile;
    f->kv_layout = a->kv_layout;
}

/* The fused call's own outputs against everything it reads or updates (the stages check the rest). */
static dsops_status check_outputs(const dia_args *a)
{
    /* the caches are written too: apart from each other and from every input of every stage (a stage's own
     * checks see only its own tensors) */
    const dsops_named_tensor outs[] = {
        {&a->out, "out"}, {&a->topk_indices, "topk_indices"}, {&a->lse, "lse"}, {&a->kv_cache, "kv_cache"},
        {&a->kv_scale_cache, "kv_scale_cache"}, {&a->kr_cache, "kr_cache"}, {&a->kv_packed, "kv_packed"},
        {&a->idx_k_cache, "idx_k_cache"}, {&a->idx_k_scale_cache, "idx_k_scale_cache"}};
    const dsops_named_tensor ins[] = {
        {&a->x, "x"}, {&a->cu_seqlens_q, "cu_seqlens_q"}, {&a->seqused_kv, "seqused_kv"},
        {&a->block_table, "block_table"}, {&a->cache_index, "cache_index"}, {&a->rope_cos, "rope_cos"},
        {&a->rope_sin, "rope_sin"}, {&a->wq_a, "wq_a"}, {&a->gamma_cq, "gamma_cq"}, {&a->wq_b, "wq_b"},
        {&a->wq_b_scale, "wq_b_scale"}, {&a->w_uk, "w_uk"}, {&a->wkv_a, "wkv_a"}, {&a->gamma_ckv, "gamma_ckv"},
        {&a->idx_wq_b, "idx_wq_b"}, {&a->idx_wq_b_scale, "idx_wq_b_scale"}, {&a->idx_wk, "idx_wk"},
        {&a->weights_proj, "weights_proj"}, {&a->ln_gamma_k, "ln_gamma_k"}, {&a->ln_beta_k, "ln_beta_k"},
        {&a->hadamard_q, "hadamard_q"}, {&a->hadamard_k, "hadamard_k"}};
    return dsops_check_outputs_apart(outs, sizeof outs / sizeof outs[0], ins, sizeof ins / sizeof ins[0]);
}

dsops_status dsops_sparse_attention_v32_prepare(dsops_context *ctx, const dia_args *a, dsops_prepared **out)
{
    if (!a || !out)
        return dsops_fail(DSOPS_ERR_NULL, "%s is NULL", a ? "prepared" : "args");
    *out = NULL;
    dia_dims d;
    DSOPS_TRY(derive_dims(a, &d));
    dia_args plain = *a;
    plain.prepared = NULL;
    dia_stages st;
    dia_layout L;
    DSOPS_TRY(layout_or_fail(&d, &L));
    build_stages(&plain, &d, &L, NULL, &st);
    dsops_prepared *p = calloc(1, sizeof *p);
    if (!p)
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate prepared weights");
    p->op = "sparse_attention_v32";
    dsops_status s = dsops_mla_prolog_v32_prepare(ctx, &st.mla, &p->parts[0]);
    if (s == DSOPS_OK)
        s = dsops_indexer_prolog_v32_prepare(ctx, &st.idx, &p->parts[1]);
    if (s != DSOPS_OK) {
        dsops_prepared_destroy(p);
        return s;
    }
    *out = p;
    dsops_clear_error();
    return DSOPS_OK;
}

dsops_status dsops_sparse_attention_v32(dsops_context *ctx, const dia_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    if (a->prepared && strcmp(a->prepared->op, "sparse_attention_v32") != 0)
        return dsops_fail(DSOPS_ERR_PARAM, "prepared was made for %s, not for sparse_attention_v32", a->prepared->op);
    dia_dims d;
    DSOPS_TRY(derive_dims(a, &d));
    DSOPS_TRY(check_outputs(a));
    dia_layout L;
    DSOPS_TRY(layout_or_fail(&d, &L));
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    char *buf = dsops_scratch_outer(use, L.total);
    if (!buf) {
        dsops_context_end(ctx, use);
        return DSOPS_ERR_NOMEM;
    }
    dia_stages st;
    build_stages(a, &d, &L, buf, &st);
    /* every stage before the first write; stage 4's top-k indices are positions the indexer
     * produces (below each token's visible length, whose block-table entries stage 3 checks) */
    const char *stage = "mla_prolog_v32";
    dsops_status s = dsops_mla_prolog_v32_validate(&st.mla, buf + L.slots);
    if (s == DSOPS_OK && (stage = "indexer_prolog_v32"))
        s = dsops_indexer_prolog_v32_validate(&st.idx, buf + L.slots);
    if (s == DSOPS_OK && (stage = "lightning_indexer"))
        s = dsops_li_validate(&st.li);
    if (s == DSOPS_OK && (stage = "sparse_flash_attention_v32"))
        s = dsops_sfa_v32_validate(&st.sfa, false);
    if (s == DSOPS_OK && (stage = "mla_prolog_v32"))
        s = dsops_mla_prolog_v32(use, &st.mla);
    if (s == DSOPS_OK && (stage = "indexer_prolog_v32"))
        s = dsops_indexer_prolog_v32(use, &st.idx);
    if (s == DSOPS_OK && (stage = "lightning_indexer"))
        s = dsops_lightning_indexer(use, &st.li);
    if (s == DSOPS_OK && (stage = "sparse_flash_attention_v32"))
        s = dsops_sparse_flash_attention_v32(use, &st.sfa);
    dsops_context_end(ctx, use);
    if (s != DSOPS_OK) {
        /* name the stage: its fields are the stage operator's (eps_cq is mla_eps_cq here, q_nope an
         * intermediate) */
        char msg[448];
        snprintf(msg, sizeof msg, "%s", dsops_last_error());
        return dsops_fail(s, "%s stage: %s", stage, msg);
    }
    return DSOPS_OK;
}
