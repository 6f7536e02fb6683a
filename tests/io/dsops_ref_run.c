/*
 * dsops_ref_run: `dsops run` with the reference oracles in place of the library's operators.
 *
 *   dsops_ref_run <operator> --in IN --out OUT [--set name=value]... [--threads N] [--isa TIER]
 *
 * The oracles assume valid arguments, so each call is first validated by the library's operator (whose
 * outputs go to scratch memory and are discarded); a rejected call reports the library's status and
 * message exactly as `dsops run` does. The outputs written to OUT are the oracle's alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "dsops.h"
#include "dsops_run.h"
#include "ref.h"

/* Dense scratch tensor with the shape and dtype of t (NULL data when t is absent). */
static dsops_tensor scratch_like(const dsops_tensor *t, void **mem)
{
    *mem = NULL;
    if (t->data == NULL)
        return *t;
    size_t n = dsops_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    *mem = calloc(n ? n : 1, 1);
    return dsops_tensor_make(*mem, t->dtype, t->ndim, t->shape);
}

static dsops_status ref_sfa(dsops_context *ctx, const void *args)
{
    const dsops_sparse_flash_attention_v32_args *a = args; /* the call record starts with the args struct */
    dsops_sparse_flash_attention_v32_args v = *a;
    void *out_mem, *lse_mem;
    v.out = scratch_like(&a->out, &out_mem);
    v.lse = scratch_like(&a->lse, &lse_mem);
    dsops_status st = DSOPS_ERR_NOMEM;
    if ((a->out.data == NULL || out_mem != NULL) && (a->lse.data == NULL || lse_mem != NULL))
        st = dsops_sparse_flash_attention_v32(ctx, &v);
    free(out_mem);
    free(lse_mem);
    if (st == DSOPS_OK)
        dsops_ref_sparse_flash_attention_v32(a);
    return st;
}

static dsops_status ref_li(dsops_context *ctx, const void *args)
{
    const dsops_lightning_indexer_args *a = args; /* the call record starts with the args struct */
    dsops_lightning_indexer_args v = *a;
    void *idx_mem, *score_mem;
    v.topk_indices = scratch_like(&a->topk_indices, &idx_mem);
    v.topk_scores = scratch_like(&a->topk_scores, &score_mem);
    dsops_status st = DSOPS_ERR_NOMEM;
    if ((a->topk_indices.data == NULL || idx_mem != NULL) && (a->topk_scores.data == NULL || score_mem != NULL))
        st = dsops_lightning_indexer(ctx, &v);
    free(idx_mem);
    free(score_mem);
    if (st == DSOPS_OK)
        dsops_ref_lightning_indexer(a);
    return st;
}

/* The shared primitives: the library validates on scratch outputs (scratch caches for cache_store),
 * then the oracle writes the real ones. */
static dsops_status ref_rmsnorm(dsops_context *ctx, const void *args)
{
    const dsops_rmsnorm_args *a = args; /* the call record starts with the args struct */
    dsops_rmsnorm_args v = *a;
    void *mem;
    v.y = scratch_like(&a->y, &mem);
    dsops_status st = mem != NULL ? dsops_rmsnorm(ctx, &v) : DSOPS_ERR_NOMEM;
    free(mem);
    if (st == DSOPS_OK)
        dsops_ref_rmsnorm(a);
    return st;
}

static dsops_status ref_rope_tables(dsops_context *ctx, const void *args)
{
    const dsops_rope_tables_args *a = args; /* the call record starts with the args struct */
    dsops_rope_tables_args v = *a;
    void *cmem, *smem;
    v.cos = scratch_like(&a->cos, &cmem);
    v.sin = scratch_like(&a->sin, &smem);
    dsops_status st = cmem != NULL && smem != NULL ? dsops_rope_tables(ctx, &v) : DSOPS_ERR_NOMEM;
    free(cmem);
    free(smem);
    if (st == DSOPS_OK)
        dsops_ref_rope_tables(a);
    return st;
}

static dsops_status ref_rope_apply(dsops_context *ctx, const void *args)
{
    const dsops_rope_apply_args *a = args; /* the call record starts with the args struct */
    dsops_rope_apply_args v = *a;
    void *mem;
    v.y = scratch_like(&a->y, &mem);
    dsops_status st = mem != NULL ? dsops_rope_apply(ctx, &v) : DSOPS_ERR_NOMEM;
    free(mem);
    if (st == DSOPS_OK)
        dsops_ref_rope_apply(a);
    return st;
}

static dsops_status ref_quant_q8(dsops_context *ctx, const void *args)
{
    const dsops_quant_q8_args *a = args; /* the call record starts with the args struct */
    dsops_quant_q8_args v = *a;
    void *qmem, *smem;
    v.q = scratch_like(&a->q, &qmem);
    v.scale = scratch_like(&a->scale, &smem);
    dsops_status st = qmem != NULL && smem != NULL ? dsops_quant_q8(ctx, &v) : DSOPS_ERR_NOMEM;
    free(qmem);
    free(smem);
    if (st == DSOPS_OK)
        dsops_ref_quant_q8(a);
    return st;
}

static dsops_status ref_cache_store(dsops_context *ctx, const void *args)
{
    const dsops_cache_store_args *a = args; /* the call record starts with the args struct */
    dsops_cache_store_args v = *a;
    void *cmem, *smem;
    v.cache = scratch_like(&a->cache, &cmem);
    v.cache_scale = scratch_like(&a->cache_scale, &smem);
    dsops_status st = DSOPS_ERR_NOMEM;
    if ((a->cache.data == NULL || cmem != NULL) && (a->cache_scale.data == NULL || smem != NULL))
        st = dsops_cache_store(ctx, &v);
    free(cmem);
    free(smem);
    if (st == DSOPS_OK)
        dsops_ref_cache_store(a);
    return st;
}

/* sparse_attention_v32: the library validates on scratch outputs and scratch copies of the caches; then the
 * oracle of every stage runs in sequence (spec §4.5) on the real caches and outputs. */
static dsops_status ref_dia(dsops_context *ctx, const void *args)
{
    const dsops_sparse_attention_v32_args *a = args; /* the call record starts with the args struct */
    dsops_sparse_attention_v32_args v = *a;
    dsops_tensor *scratch[9] = {&v.out, &v.topk_indices, &v.lse, &v.kv_cache, &v.kv_scale_cache, &v.kr_cache,
                                &v.kv_packed, &v.idx_k_cache, &v.idx_k_scale_cache};
    void *mem[9];
    int ok = 1;
    for (int i = 0; i < 9; i++) {
        const dsops_tensor orig = *scratch[i];
        *scratch[i] = scratch_like(&orig, &mem[i]);
        ok &= orig.data == NULL || mem[i] != NULL;
        if (i >= 3 && mem[i] != NULL) { /* caches: the same contents, so that validation sees the same call */
            size_t n = dsops_dtype_size(orig.dtype);
            for (int d = 0; d < orig.ndim; d++)
                n *= (size_t)orig.shape[d];
            memcpy(mem[i], orig.data, n);
        }
    }
    dsops_status st = ok ? dsops_sparse_attention_v32(ctx, &v) : DSOPS_ERR_NOMEM;
    for (int i = 0; i < 9; i++)
        free(mem[i]);
    if (st != DSOPS_OK)
        return st;
    dsops_dia_stages *sg = dsops_dia_stages_make(a);
    if (sg == NULL)
        return DSOPS_ERR_NOMEM;
    dsops_ref_mla_prolog_v32(&sg->mla);
    dsops_ref_indexer_prolog_v32(&sg->idx);
    dsops_ref_lightning_indexer(&sg->li);
    dsops_ref_sparse_flash_attention_v32(&sg->sfa);
    if (a->topk_indices.data != NULL) {
        const int32_t *src = sg->li.topk_indices.data;
        int32_t *dst = a->topk_indices.data;
        const int64_t T = a->topk_indices.shape[0], K = a->topk_indices.shape[1];
        for (int64_t t = 0; t < T; t++)
            for (int64_t k = 0; k < K; k++)
                dst[t * a->topk_indices.stride[0] + k * a->topk_indices.stride[1]] = src[t * K + k];
    }
    dsops_dia_stages_free(sg);
    return DSOPS_OK;
}

/* Dense scratch copy of t (contents included), for in-out caches that validation may see; NULL data when
 * t is absent. */
static dsops_tensor scratch_copy(const dsops_tensor *t, void **mem)
{
    dsops_tensor c = scratch_like(t, mem);
    if (*mem != NULL) {
        size_t n = dsops_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++)
            n *= (size_t)t->shape[d];
        memcpy(*mem, t->data, n);
    }
    return c;
}

/* The prologs: the library validates on scratch outputs and scratch copies of the caches, then the oracle
 * writes the real outputs and caches. */
static dsops_status ref_mla_prolog(dsops_context *ctx, const void *args)
{
    const dsops_mla_prolog_v32_args *a = args; /* the call record starts with the args struct */
    dsops_mla_prolog_v32_args v = *a;
    dsops_tensor *outs[4] = {&v.q_nope, &v.q_rope, &v.qr, &v.qr_scale};
    dsops_tensor *caches[4] = {&v.kv_cache, &v.kv_scale_cache, &v.kr_cache, &v.kv_packed};
    void *mem[8];
    int ok = 1;
    for (int i = 0; i < 8; i++) {
        dsops_tensor *t = i < 4 ? outs[i] : caches[i - 4];
        const dsops_tensor orig = *t;
        *t = i < 4 ? scratch_like(&orig, &mem[i]) : scratch_copy(&orig, &mem[i]);
        ok &= orig.data == NULL || mem[i] != NULL;
    }
    dsops_status st = ok ? dsops_mla_prolog_v32(ctx, &v) : DSOPS_ERR_NOMEM;
    for (int i = 0; i < 8; i++)
        free(mem[i]);
    if (st == DSOPS_OK)
        dsops_ref_mla_prolog_v32(a);
    return st;
}

static dsops_status ref_indexer_prolog(dsops_context *ctx, const void *args)
{
    const dsops_indexer_prolog_v32_args *a = args; /* the call record starts with the args struct */
    dsops_indexer_prolog_v32_args v = *a;
    dsops_tensor *outs[3] = {&v.q_idx, &v.q_idx_scale, &v.weights};
    dsops_tensor *caches[2] = {&v.idx_k_cache, &v.idx_k_scale_cache};
    void *mem[5];
    int ok = 1;
    for (int i = 0; i < 5; i++) {
        dsops_tensor *t = i < 3 ? outs[i] : caches[i - 3];
        const dsops_tensor orig = *t;
        *t = i < 3 ? scratch_like(&orig, &mem[i]) : scratch_copy(&orig, &mem[i]);
        ok &= orig.data == NULL || mem[i] != NULL;
    }
    dsops_status st = ok ? dsops_indexer_prolog_v32(ctx, &v) : DSOPS_ERR_NOMEM;
    for (int i = 0; i < 5; i++)
        free(mem[i]);
    if (st == DSOPS_OK)
        dsops_ref_indexer_prolog_v32(a);
    return st;
}

static dsops_status ref_hc_pre(dsops_context *ctx, const void *args)
{
    const dsops_hc_pre_args *a = args; /* the call record starts with the args struct */
    dsops_hc_pre_args v = *a;
    dsops_tensor *outs[4] = {&v.y, &v.post, &v.comb, &v.pre};
    void *mem[4];
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        const dsops_tensor orig = *outs[i];
        *outs[i] = scratch_like(&orig, &mem[i]);
        ok &= orig.data == NULL || mem[i] != NULL;
    }
    dsops_status st = ok ? dsops_hc_pre(ctx, &v) : DSOPS_ERR_NOMEM;
    for (int i = 0; i < 4; i++)
        free(mem[i]);
    if (st == DSOPS_OK)
        dsops_ref_hc_pre(a);
    return st;
}

static dsops_status ref_hc_post(dsops_context *ctx, const void *args)
{
    const dsops_hc_post_args *a = args; /* the call record starts with the args struct */
    dsops_hc_post_args v = *a;
    void *omem;
    v.out = scratch_like(&a->out, &omem);
    dsops_status st = a->out.data == NULL || omem != NULL ? dsops_hc_post(ctx, &v) : DSOPS_ERR_NOMEM;
    free(omem);
    if (st == DSOPS_OK)
        dsops_ref_hc_post(a);
    return st;
}

/* The V4 prologs write no cache: the library validates on scratch outputs, then the oracle writes them. */
static dsops_status ref_mla_prolog_v4(dsops_context *ctx, const void *args)
{
    const dsops_mla_prolog_v4_args *a = args; /* the call record starts with the args struct */
    dsops_mla_prolog_v4_args v = *a;
    dsops_tensor *outs[4] = {&v.q, &v.kv, &v.qr, &v.qr_scale};
    void *mem[4];
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        const dsops_tensor orig = *outs[i];
        *outs[i] = scratch_like(&orig, &mem[i]);
        ok &= orig.data == NULL || mem[i] != NULL;
    }
    dsops_status st = ok ? dsops_mla_prolog_v4(ctx, &v) : DSOPS_ERR_NOMEM;
    for (int i = 0; i < 4; i++)
        free(mem[i]);
    if (st == DSOPS_OK)
        dsops_ref_mla_prolog_v4(a);
    return st;
}

static dsops_status ref_indexer_prolog_v4(dsops_context *ctx, const void *args)
{
    const dsops_indexer_prolog_v4_args *a = args; /* the call record starts with the args struct */
    dsops_indexer_prolog_v4_args v = *a;
    dsops_tensor *outs[3] = {&v.q_idx, &v.q_idx_scale, &v.weights};
    void *mem[3];
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        const dsops_tensor orig = *outs[i];
        *outs[i] = scratch_like(&orig, &mem[i]);
        ok &= orig.data == NULL || mem[i] != NULL;
    }
    dsops_status st = ok ? dsops_indexer_prolog_v4(ctx, &v) : DSOPS_ERR_NOMEM;
    for (int i = 0; i < 3; i++)
        free(mem[i]);
    if (st == DSOPS_OK)
        dsops_ref_indexer_prolog_v4(a);
    return st;
}

/* compressor: the library validates on scratch outputs and scratch copies of both states (validation reads
 * the tables, not the states, but a copy keeps the call identical); then the oracle updates the real ones. */
static dsops_status ref_compressor(dsops_context *ctx, const void *args)
{
    const dsops_compressor_args *a = args; /* the call record starts with the args struct */
    dsops_compressor_args v = *a;
    dsops_tensor *outs[2] = {&v.out, &v.out_count};
    dsops_tensor *states[2] = {&v.kv_state, &v.score_state};
    void *mem[4];
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        dsops_tensor *t = i < 2 ? outs[i] : states[i - 2];
        const dsops_tensor orig = *t;
        *t = i < 2 ? scratch_like(&orig, &mem[i]) : scratch_copy(&orig, &mem[i]);
        ok &= orig.data == NULL || mem[i] != NULL;
    }
    dsops_status st = ok ? dsops_compressor(ctx, &v) : DSOPS_ERR_NOMEM;
    for (int i = 0; i < 4; i++)
        free(mem[i]);
    if (st == DSOPS_OK)
        dsops_ref_compressor(a);
    return st;
}

/* sas (swa, cfa, scfa): the library validates on scratch outputs, then the oracle writes out and lse. */
static dsops_status ref_sas(dsops_context *ctx, const void *args)
{
    const dsops_sas_args *a = args; /* the call record starts with the args struct */
    dsops_sas_args v = *a;
    void *out_mem, *lse_mem;
    v.out = scratch_like(&a->out, &out_mem);
    v.lse = scratch_like(&a->lse, &lse_mem);
    dsops_status st = DSOPS_ERR_NOMEM;
    if ((a->out.data == NULL || out_mem != NULL) && (a->lse.data == NULL || lse_mem != NULL))
        st = dsops_sas(ctx, &v);
    free(out_mem);
    free(lse_mem);
    if (st == DSOPS_OK)
        dsops_ref_sas(a);
    return st;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s <operator> --in IN --out OUT [--set name=value]...\n", argv[0]);
        dsops_run_print_usage(stderr);
        return 2;
    }
    static const dsops_run_override refs[] = {
        {"sparse_flash_attention_v32", ref_sfa}, {"lightning_indexer", ref_li}, {"rmsnorm", ref_rmsnorm},
        {"rope_tables", ref_rope_tables}, {"rope_apply", ref_rope_apply}, {"quant_q8", ref_quant_q8},
        {"cache_store", ref_cache_store}, {"sparse_attention_v32", ref_dia}, {"mla_prolog_v32", ref_mla_prolog},
        {"indexer_prolog_v32", ref_indexer_prolog}, {"hc_pre", ref_hc_pre}, {"hc_post", ref_hc_post},
        {"mla_prolog_v4", ref_mla_prolog_v4}, {"indexer_prolog_v4", ref_indexer_prolog_v4},
        {"compressor", ref_compressor}, {"sas", ref_sas}, {NULL, NULL}};
    return dsops_cmd_run(argc - 1, argv + 1, refs);
}
