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

/* The tensors a call writes, moved to scratch memory while the library validates the call. */
typedef struct scratch_set {
    void *mem[9]; /* one per written tensor: sparse_attention_v32 writes the most, 9 */
    int n;
} scratch_set;

/* Points the n tensors *written[i] at scratch memory: the first n_out (outputs) at zeroed memory, the others
 * (caches and states, which the call reads too) at copies, so that the library validates the same call
 * without writing the caller's memory. 0 when memory ran out; scratch_free(s) in either case. */
static int scratch_begin(scratch_set *s, dsops_tensor *const *written, int n, int n_out)
{
    int ok = 1;
    s->n = n;
    for (int i = 0; i < n; i++) {
        const dsops_tensor orig = *written[i];
        *written[i] = i < n_out ? scratch_like(&orig, &s->mem[i]) : scratch_copy(&orig, &s->mem[i]);
        ok &= orig.data == NULL || s->mem[i] != NULL;
    }
    return ok;
}

static void scratch_free(scratch_set *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->mem[i]);
}

/* static dsops_status fn(ctx, args): the library validates the call of args_type on scratch copies of the
 * tensors it writes (the n_out outputs, then the caches / states, listed as &v.<field>), then, when the library
 * accepts it, the oracle writes the real ones. */
#define VALIDATED_ORACLE(fn, args_type, library, oracle, n_out, ...)                                            \
    static dsops_status fn(dsops_context *ctx, const void *args)                                                \
    {                                                                                                           \
        const args_type *a = args; /* the call record starts with the args struct */                            \
        args_type v = *a;                                                                                       \
        dsops_tensor *written[] = {__VA_ARGS__};                                                                \
        scratch_set s;                                                                                          \
        const int n = (int)(sizeof written / sizeof written[0]);                                                \
        dsops_status st = scratch_begin(&s, written, n, n_out) ? library(ctx, &v) : DSOPS_ERR_NOMEM;            \
        scratch_free(&s);                                                                                       \
        if (st == DSOPS_OK)                                                                                     \
            oracle(a);                                                                                          \
        return st;                                                                                              \
    }

VALIDATED_ORACLE(ref_sfa, dsops_sparse_flash_attention_v32_args, dsops_sparse_flash_attention_v32,
                 dsops_ref_sparse_flash_attention_v32, 2, &v.out, &v.lse)
VALIDATED_ORACLE(ref_li, dsops_lightning_indexer_args, dsops_lightning_indexer, dsops_ref_lightning_indexer, 2,
                 &v.topk_indices, &v.topk_scores)

/* The shared primitives (cache_store's cache and scale are outputs: it reads neither). */
VALIDATED_ORACLE(ref_rmsnorm, dsops_rmsnorm_args, dsops_rmsnorm, dsops_ref_rmsnorm, 1, &v.y)
VALIDATED_ORACLE(ref_rope_tables, dsops_rope_tables_args, dsops_rope_tables, dsops_ref_rope_tables, 2, &v.cos, &v.sin)
VALIDATED_ORACLE(ref_rope_apply, dsops_rope_apply_args, dsops_rope_apply, dsops_ref_rope_apply, 1, &v.y)
VALIDATED_ORACLE(ref_quant_q8, dsops_quant_q8_args, dsops_quant_q8, dsops_ref_quant_q8, 2, &v.q, &v.scale)
VALIDATED_ORACLE(ref_cache_store, dsops_cache_store_args, dsops_cache_store, dsops_ref_cache_store, 2, &v.cache,
                 &v.cache_scale)

/* The prologs: outputs, then the caches they write. */
VALIDATED_ORACLE(ref_mla_prolog, dsops_mla_prolog_v32_args, dsops_mla_prolog_v32, dsops_ref_mla_prolog_v32, 4,
                 &v.q_nope, &v.q_rope, &v.qr, &v.qr_scale, &v.kv_cache, &v.kv_scale_cache, &v.kr_cache,
                 &v.kv_packed)
VALIDATED_ORACLE(ref_indexer_prolog, dsops_indexer_prolog_v32_args, dsops_indexer_prolog_v32,
                 dsops_ref_indexer_prolog_v32, 3, &v.q_idx, &v.q_idx_scale, &v.weights, &v.idx_k_cache,
                 &v.idx_k_scale_cache)

VALIDATED_ORACLE(ref_hc_pre, dsops_hc_pre_args, dsops_hc_pre, dsops_ref_hc_pre, 4, &v.y, &v.post, &v.comb, &v.pre)
VALIDATED_ORACLE(ref_hc_post, dsops_hc_post_args, dsops_hc_post, dsops_ref_hc_post, 1, &v.out)

/* The V4 prologs write no cache. */
VALIDATED_ORACLE(ref_mla_prolog_v4, dsops_mla_prolog_v4_args, dsops_mla_prolog_v4, dsops_ref_mla_prolog_v4, 4, &v.q,
                 &v.kv, &v.qr, &v.qr_scale)
VALIDATED_ORACLE(ref_indexer_prolog_v4, dsops_indexer_prolog_v4_args, dsops_indexer_prolog_v4,
                 dsops_ref_indexer_prolog_v4, 3, &v.q_idx, &v.q_idx_scale, &v.weights)

/* compressor: both states are copied (validation reads the tables, not the states, but a copy keeps the call
 * identical). */
VALIDATED_ORACLE(ref_compressor, dsops_compressor_args, dsops_compressor, dsops_ref_compressor, 2, &v.out,
                 &v.out_count, &v.kv_state, &v.score_state)

/* sas (swa, cfa, scfa). */
VALIDATED_ORACLE(ref_sas, dsops_sas_args, dsops_sas, dsops_ref_sas, 2, &v.out, &v.lse)

/* sparse_attention_v32: the library validates on scratch outputs and scratch copies of the caches; then the
 * oracle of every stage runs in sequence (spec §4.5) on the real caches and outputs. */
static dsops_status ref_dia(dsops_context *ctx, const void *args)
{
    const dsops_sparse_attention_v32_args *a = args; /* the call record starts with the args struct */
    dsops_sparse_attention_v32_args v = *a;
    dsops_tensor *written[9] = {&v.out, &v.topk_indices, &v.lse, &v.kv_cache, &v.kv_scale_cache, &v.kr_cache,
                                &v.kv_packed, &v.idx_k_cache, &v.idx_k_scale_cache};
    scratch_set s;
    dsops_status st = scratch_begin(&s, written, 9, 3) ? dsops_sparse_attention_v32(ctx, &v) : DSOPS_ERR_NOMEM;
    scratch_free(&s);
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
