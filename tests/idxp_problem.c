#include "idxp_problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "problem_common.h"
#include "ref.h"
#include "test_util.h"

#define DR 64

/* ---- data ------------------------------------------------------------------------------------------ */

static void fill_int8(const dsops_tensor *t, tu_rng *r, int extreme)
{
    for (int64_t i = 0; i < t->shape[0]; i++)
        for (int64_t k = 0; k < t->shape[1]; k++) {
            int v = extreme ? ((tu_rng_u64(r) & 1) ? 127 : -128) : (int)tu_rng_int(r, -128, 127);
            *(int8_t *)tf_eaddr(t, i, k, 0) = (int8_t)v;
        }
}

/* ---- problem builder ------------------------------------------------------------------------------- */

ip_problem *ip_make(const ip_spec *spec, uint64_t seed)
{
    ip_problem *p = tf_xcalloc(sizeof *p);
    p->sp = *spec;
    ip_spec *sp = &p->sp;
    p->fx.big_guard = sp->big_guard;
    if (!sp->had_dtype)
        sp->had_dtype = DSOPS_BF16;
    if (!sp->ln_dtype)
        sp->ln_dtype = DSOPS_BF16;
    if (!sp->table_dtype)
        sp->table_dtype = DSOPS_BF16;
    if (sp->NB <= 0)
        sp->NB = pc_default_blocks(sp->T, sp->BS);
    if (sp->int8)
        sp->no_hadamard_q = sp->no_hadamard_k = 0;
    tu_rng r;
    tu_rng_seed(&r, seed);

    const int64_t T = sp->T, H = sp->H, Q = sp->Q, NI = sp->NI, DI = sp->DI, BS = sp->BS, NB = sp->NB;
    const int64_t NQ = NI * DI;
    const int64_t pad = sp->strided ? 5 : 0, wpad = sp->strided ? 8 : 0;
    const int share = sp->strided == 2 ? (sp->share ? sp->share : 7) : 0;
    const dsops_dtype qdt = sp->int8 ? DSOPS_INT8 : DSOPS_BF16;
    p->T = T;
    dsops_indexer_prolog_v32_args *a = &p->args;
    memset(a, 0, sizeof *a);
    a->ln_eps = sp->ln_eps;
    a->weights_scale = sp->weights_scale;
    a->rope_mode = sp->rope_mode;
    a->rope_inverse = sp->rope_inverse;

    int64_t s[3];
    /* inputs */
    s[0] = T, s[1] = H;
    a->x = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, pad, 0, 0);
    s[0] = T, s[1] = Q;
    a->qr = tf_alloc_view(&p->fx, qdt, 2, s, pad, 0, 0);
    s[0] = NQ, s[1] = Q;
    a->idx_wq_b = tf_alloc_view(&p->fx, qdt, 2, s, wpad, 0, 0);
    if (sp->int8) {
        s[0] = T;
        a->qr_scale = tf_alloc_view(&p->fx, DSOPS_FP32, 1, s, 0, 0, 0);
        s[0] = NQ;
        a->idx_wq_b_scale = tf_alloc_view(&p->fx, DSOPS_FP32, 1, s, 0, 0, 0);
    }
    s[0] = DI, s[1] = H;
    a->idx_wk = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, wpad, 0, 0);
    s[0] = NI, s[1] = H;
    a->weights_proj = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, wpad, 0, 0);
    s[0] = DI;
    a->ln_gamma_k = tf_alloc_view(&p->fx, sp->tiny_key ? DSOPS_FP32 : sp->ln_dtype, 1, s, 0, 0, 0);
    const dsops_dtype beta_dt = sp->mixed_ln ? (sp->ln_dtype == DSOPS_FP32 ? DSOPS_BF16 : DSOPS_FP32) : sp->ln_dtype;
    a->ln_beta_k = tf_alloc_view(&p->fx, beta_dt, 1, s, 0, 0, 0);
    pc_rope_tables(&p->fx, sp->table_dtype, T, pad, share & 2, &a->rope_cos, &a->rope_sin);
    s[0] = DI, s[1] = DI;
    if (!sp->no_hadamard_q)
        a->hadamard_q = tf_alloc_view(&p->fx, sp->had_dtype, 2, s, wpad, 0, 0);
    if (!sp->no_hadamard_k)
        a->hadamard_k = tf_alloc_view(&p->fx, sp->had_dtype, 2, s, wpad, 0, 0);
    s[0] = T;
    a->cache_index = tf_alloc_view(&p->fx, DSOPS_INT64, 1, s, 0, 0, 0);
    p->cache_index = a->cache_index.data;

    /* outputs */
    if (share & 1) {
        /* one row per (token, head): DI query values, then the head's q_idx_scale (int8) or weight (bf16),
         * then padding; tokens NI rows apart plus `pad` rows' worth of bytes */
        const int64_t rowb = sp->int8 ? DI + 4 : 2 * (DI + 2); /* bytes of one row (even) */
        const int64_t tokb = NI * rowb + 2 * pad;
        const size_t bytes = (size_t)(T * tokb) + 2 * TF_GUARD;
        unsigned char *b = tf_own(&p->fx, bytes);
        tf_add_region(&p->fx, b, bytes, 1, sp->int8 ? DSOPS_INT8 : DSOPS_BF16);
        unsigned char *base = b + TF_GUARD;
        const int64_t qes = sp->int8 ? 1 : 2;
        s[0] = T, s[1] = NI, s[2] = DI;
        a->q_idx = dsops_tensor_make(base, qdt, 3, s);
        a->q_idx.stride[0] = tokb / qes, a->q_idx.stride[1] = rowb / qes;
        s[0] = T, s[1] = NI;
        dsops_tensor side = dsops_tensor_make(base + DI * qes, DSOPS_FP16, 2, s);
        side.stride[0] = tokb / 2, side.stride[1] = rowb / 2;
        if (sp->int8) {
            a->q_idx_scale = side;
            a->weights = tf_alloc_view(&p->fx, DSOPS_FP16, 2, s, pad, 1, 1);
        } else {
            side.dtype = DSOPS_BF16;
            a->weights = side;
        }
    } else {
        s[0] = T, s[1] = NI, s[2] = DI;
        a->q_idx = tf_alloc_view(&p->fx, qdt, 3, s, pad, 1, 1);
        s[0] = T, s[1] = NI;
        if (sp->int8)
            a->q_idx_scale = tf_alloc_view(&p->fx, DSOPS_FP16, 2, s, pad, 1, 1);
        a->weights = tf_alloc_view(&p->fx, sp->int8 ? DSOPS_FP16 : DSOPS_BF16, 2, s, pad, 1, 1);
    }

    /* caches */
    if ((share & 4) && sp->int8) {
        /* one row per slot: DI int8 key values, the fp16 scale, 2 bytes of padding; 16 bytes between blocks */
        const int64_t rowb = DI + 4, blkb = BS * rowb + 16;
        const size_t bytes = (size_t)(NB * blkb) + 2 * TF_GUARD;
        unsigned char *b = tf_own(&p->fx, bytes);
        tf_add_region(&p->fx, b, bytes, 0, DSOPS_UINT8);
        unsigned char *base = b + TF_GUARD;
        s[0] = NB, s[1] = BS, s[2] = DI;
        a->idx_k_cache = dsops_tensor_make(base, DSOPS_INT8, 3, s);
        a->idx_k_cache.stride[0] = blkb, a->idx_k_cache.stride[1] = rowb;
        s[0] = NB, s[1] = BS;
        a->idx_k_scale_cache = dsops_tensor_make(base + DI, DSOPS_FP16, 2, s);
        a->idx_k_scale_cache.stride[0] = blkb / 2, a->idx_k_scale_cache.stride[1] = rowb / 2;
    } else {
        const int64_t cpad = sp->strided ? 3 : 0;
        s[0] = NB, s[1] = BS, s[2] = DI;
        a->idx_k_cache = tf_alloc_view(&p->fx, qdt, 3, s, cpad, 1, 0);
        if (sp->int8) {
            s[0] = NB, s[1] = BS;
            a->idx_k_scale_cache = tf_alloc_view(&p->fx, DSOPS_FP16, 2, s, cpad, 1, 0);
        }
    }

    /* data */
    pc_fill_rows(&a->x, &r, sp->zero_x);
    if (sp->int8) {
        fill_int8(&a->qr, &r, sp->int8_extreme);
        fill_int8(&a->idx_wq_b, &r, sp->int8_extreme);
        tf_fill_uniform(&a->qr_scale, &r, -1, 1);         /* negative scales occur (vendor data) */
        tf_fill_uniform(&a->idx_wq_b_scale, &r, -1, 1);
    } else {
        tf_fill_uniform(&a->qr, &r, -1, 1);
        tf_fill_uniform(&a->idx_wq_b, &r, -0.1f, 0.1f);
    }
    if (sp->int8 && sp->int8_extreme && T > 0) {
        /* token 0 all 127 against rows n % 5 == 0 all 127: dots of 16129 * Q, beyond 2^24 for Q > 1040
         * (the int32 -> fp32 conversion rounds) */
        for (int64_t k = 0; k < Q; k++)
            *(int8_t *)tf_eaddr(&a->qr, 0, k, 0) = 127;
        for (int64_t n = 0; n < NQ; n += 5)
            for (int64_t k = 0; k < Q; k++)
                *(int8_t *)tf_eaddr(&a->idx_wq_b, n, k, 0) = 127;
    }
    for (int64_t t = 0; t < T && t < sp->zero_qr; t++)
        for (int64_t k = 0; k < Q; k++)
            tf_putf(&a->qr, t, k, 0, 0.0f);
    tf_fill_uniform(&a->idx_wk, &r, -0.1f, 0.1f);
    tf_fill_uniform(&a->weights_proj, &r, -0.1f, 0.1f);
    if (sp->tiny_key)
        tf_fill_uniform(&a->ln_gamma_k, &r, 0.5e-38f, 1e-38f);
    else
        tf_fill_uniform(&a->ln_gamma_k, &r, -1.5f, 1.5f);
    if (sp->tiny_key || sp->zero_beta)
        tf_fill_uniform(&a->ln_beta_k, &r, 0, 0);
    else
        tf_fill_uniform(&a->ln_beta_k, &r, -0.5f, 0.5f);
    tf_fill_uniform(&a->rope_cos, &r, -1, 1);
    tf_fill_uniform(&a->rope_sin, &r, -1, 1);
    const dsops_tensor *hads[2] = {&a->hadamard_q, &a->hadamard_k};
    for (int i = 0; i < 2; i++) {
        if (!hads[i]->data)
            continue;
        if (sp->sylvester) {
            dsops_tensor dense = dsops_tensor_make(tf_xcalloc(sizeof(float) * (size_t)(DI * DI)), sp->had_dtype, 2,
                                                   hads[i]->shape);
            dsops_ref_hadamard_matrix(&dense);
            for (int64_t k = 0; k < DI; k++)
                for (int64_t j = 0; j < DI; j++)
                    memcpy(tf_eaddr(hads[i], k, j, 0), tf_eaddr(&dense, k, j, 0), dsops_dtype_size(sp->had_dtype));
            free(dense.data);
        } else {
            tf_fill_uniform(hads[i], &r, -1, 1);
        }
    }
    /* cache rows: random, or NaN (int8: -1 with NaN scales) */
    for (int64_t b = 0; b < NB; b++)
        for (int64_t o = 0; o < BS; o++) {
            for (int64_t d = 0; d < DI; d++) {
                if (sp->int8)
                    *tf_eaddr(&a->idx_k_cache, b, o, d) = sp->nan_cache ? 0xff : (uint8_t)tu_rng_u64(&r);
                else
                    tf_putf(&a->idx_k_cache, b, o, d, sp->nan_cache ? NAN : tu_rng_uniform(&r, -1, 1));
            }
            if (sp->int8)
                tf_putf(&a->idx_k_scale_cache, b, o, 0, sp->nan_cache ? NAN : tu_rng_uniform(&r, -1, 1));
        }

    pc_cache_indices(&r, NB * BS, T, (pc_index_mode)sp->index_mode, p->cache_index);
    return p;
}

/* ---- calls: sentinels, snapshots (the fixture's, under the names the test programs use) ------------- */

void ip_free(ip_problem *p)
{
    if (p)
        tf_free(&p->fx);
    free(p);
}

void ip_prepare_call(ip_problem *p) { tf_prepare_call(&p->fx); }
void ip_restore(ip_problem *p) { tf_restore(&p->fx); }
int ip_untouched(const ip_problem *p, const char *label) { return tf_untouched(&p->fx, label); }

/* ---- the elements a call may write ------------------------------------------------------------------ */

/* outputs in order q_idx, q_idx_scale, weights, then the addressed cache rows (key, scale) in token order */
static void each_written(const void *args, tf_elem_fn fn, void *ctx)
{
    const dsops_indexer_prolog_v32_args *a = args;
    const int int8 = a->qr.dtype == DSOPS_INT8;
    tf_each_in_view(&a->q_idx, fn, ctx);
    if (int8)
        tf_each_in_view(&a->q_idx_scale, fn, ctx);
    tf_each_in_view(&a->weights, fn, ctx);
    for (int64_t t = 0; t < a->x.shape[0]; t++) {
        const int64_t r = tf_get_index(&a->cache_index, t);
        if (r < 0)
            continue;
        pc_each_in_cache_row(&a->idx_k_cache, r, fn, ctx);
        if (int8)
            pc_each_in_cache_row(&a->idx_k_scale_cache, r, fn, ctx);
    }
}

unsigned char *ip_gather(const dsops_indexer_prolog_v32_args *a, size_t *n) { return pc_gather(each_written, a, n); }

/* ---- reference ------------------------------------------------------------------------------------- */

ip_ref *ip_reference(const dsops_indexer_prolog_v32_args *a)
{
    const int64_t T = a->x.shape[0], NI = a->weights_proj.shape[0], DI = a->idx_wk.shape[0];
    const int int8 = a->qr.dtype == DSOPS_INT8;
    ip_ref *r = tf_xcalloc(sizeof *r);
    r->T = T, r->NI = NI, r->DI = DI, r->int8 = int8;

    dsops_indexer_prolog_v32_args ra = *a;
    ra.prepared = NULL;
    int64_t s[3];
    const size_t tn = (size_t)(T * NI > 0 ? T * NI : 1);
    /* dense outputs */
    s[0] = T, s[1] = NI, s[2] = DI;
    ra.q_idx = dsops_tensor_make(tf_xcalloc((int8 ? 1 : 2) * tn * (size_t)DI), int8 ? DSOPS_INT8 : DSOPS_BF16, 3, s);
    memset(&ra.q_idx_scale, 0, sizeof ra.q_idx_scale);
    if (int8)
        ra.q_idx_scale = dsops_tensor_make(tf_xcalloc(2 * tn), DSOPS_FP16, 2, s);
    ra.weights = dsops_tensor_make(tf_xcalloc(2 * tn), int8 ? DSOPS_FP16 : DSOPS_BF16, 2, s);
    /* compact caches: row w of [nw, 1, DI] for the w-th writing token */
    int64_t nw;
    int64_t *ci = pc_compact_index(&a->cache_index, &nw);
    r->nw = nw;
    s[0] = T;
    ra.cache_index = dsops_tensor_make(ci, DSOPS_INT64, 1, s);
    const int64_t rows = nw > 0 ? nw : 1;
    s[0] = rows, s[1] = 1, s[2] = DI;
    ra.idx_k_cache = dsops_tensor_make(tf_xcalloc((int8 ? 1 : 2) * (size_t)(rows * DI)), int8 ? DSOPS_INT8 : DSOPS_BF16,
                                       3, s);
    memset(&ra.idx_k_scale_cache, 0, sizeof ra.idx_k_scale_cache);
    if (int8)
        ra.idx_k_scale_cache = dsops_tensor_make(tf_xcalloc(2 * (size_t)rows), DSOPS_FP16, 2, s);

    dsops_ref_indexer_prolog_v32(&ra);

    r->q_idx = tf_xcalloc(sizeof(float) * tn * (size_t)DI);
    r->q_idx_scale = tf_xcalloc(sizeof(float) * tn);
    r->weights = tf_xcalloc(sizeof(float) * tn);
    r->key = tf_xcalloc(sizeof(float) * (size_t)(rows * DI));
    r->key_scale = tf_xcalloc(sizeof(float) * (size_t)rows);
    pc_dense_f32(&ra.q_idx, r->q_idx);
    if (int8)
        pc_dense_f32(&ra.q_idx_scale, r->q_idx_scale);
    pc_dense_f32(&ra.weights, r->weights);
    pc_dense_f32(&ra.idx_k_cache, r->key); /* [rows, 1, DI]: the rows of the writing tokens, then zeros */
    if (int8)
        pc_dense_f32(&ra.idx_k_scale_cache, r->key_scale);

    free(ra.q_idx.data);
    free(ra.q_idx_scale.data);
    free(ra.weights.data);
    free(ci);
    free(ra.idx_k_cache.data);
    free(ra.idx_k_scale_cache.data);
    return r;
}

void ip_ref_free(ip_ref *r)
{
    if (!r)
        return;
    free(r->q_idx);
    free(r->q_idx_scale);
    free(r->weights);
    free(r->key);
    free(r->key_scale);
    free(r);
}

/* ---- comparison (spec §4.2 "Tolerance") ----------------------------------------------------------- */

static const tu_tol TOL_QIDX_I8 = {1, 0, 0};
static const tu_tol TOL_QIDX_BF16 = {1e-4, 1.0 / 128, 0.005};
static const tu_tol TOL_QSCALE = {2.5e-5, 0, 0.005};
static const tu_tol TOL_KEY_I8 = {1, 0, 0.005};
static const tu_tol TOL_KEY_BF16 = {1e-4, 1.0 / 128, 0.005};
static const tu_tol TOL_KSCALE = {2.5e-5, 0, 0.005};
static const tu_tol TOL_W_FP16 = {2.5e-5, 1.0 / 1024, 0.005};
static const tu_tol TOL_W_BF16 = {1e-4, 1.0 / 128, 0.005};

int ip_check(ip_problem *p, const ip_ref *r, const char *label)
{
    const dsops_indexer_prolog_v32_args *a = &p->args;
    const int64_t T = r->T, NI = r->NI, DI = r->DI, nw = r->nw;
    const int int8 = r->int8;
    int ok = 1;
    const size_t tn = (size_t)(T * NI > 0 ? T * NI : 1);
    float *q = tf_xcalloc(sizeof(float) * tn * (size_t)DI), *qs = tf_xcalloc(sizeof(float) * tn),
          *w = tf_xcalloc(sizeof(float) * tn);

    if (T > 0) {
        pc_dense_f32(&a->q_idx, q);
        ok &= tu_compare_close_part(label, "q_idx", q, r->q_idx, (size_t)(T * NI * DI),
                                    int8 ? TOL_QIDX_I8 : TOL_QIDX_BF16);
        if (int8) {
            pc_dense_f32(&a->q_idx_scale, qs);
            ok &= tu_compare_close_part(label, "q_idx_scale", qs, r->q_idx_scale, (size_t)(T * NI), TOL_QSCALE);
        }
        pc_dense_f32(&a->weights, w);
        ok &= tu_compare_close_part(label, "weights", w, r->weights, (size_t)(T * NI), int8 ? TOL_W_FP16 : TOL_W_BF16);
    }
    free(q);
    free(qs);
    free(w);

    if (nw > 0) {
        float *key = tf_xcalloc(sizeof(float) * (size_t)(nw * DI)), *ks = tf_xcalloc(sizeof(float) * (size_t)nw);
        int64_t i = 0;
        for (int64_t t = 0; t < T; t++) {
            const int64_t row = tf_get_index(&a->cache_index, t);
            if (row < 0)
                continue;
            const int64_t BS = a->idx_k_cache.shape[1], blk = row / BS, off = row % BS;
            for (int64_t d = 0; d < DI; d++)
                key[i * DI + d] = tf_getf(&a->idx_k_cache, blk, off, d);
            if (int8)
                ks[i] = tf_getf(&a->idx_k_scale_cache, blk, off, 0);
            i++;
        }
        ok &= tu_compare_close_part(label, "cache keys", key, r->key, (size_t)(nw * DI),
                                    int8 ? TOL_KEY_I8 : TOL_KEY_BF16);
        if (int8)
            ok &= tu_compare_close_part(label, "cache key scales", ks, r->key_scale, (size_t)nw, TOL_KSCALE);
        free(key);
        free(ks);
    }

    /* everything the call may not write */
    return pc_check_only_written(&p->fx, each_written, a, label) && ok;
}

/* ---- the shared runs -------------------------------------------------------------------------------- */

/* Adapters from this operator's argument and problem types to pc_target (each prolog builder has its own). */

static dsops_status call_op(dsops_context *c, const void *args) { return dsops_indexer_prolog_v32(c, args); }

static dsops_status prepare_op(dsops_context *c, const void *args, dsops_prepared **prep)
{
    return dsops_indexer_prolog_v32_prepare(c, args, prep);
}

static unsigned char *gather_op(const void *args, size_t *n) { return pc_gather(each_written, args, n); }

static int check_op(void *p, const void *r, const char *label) { return ip_check(p, r, label); }

pc_target ip_target(ip_problem *p, const ip_ref *r)
{
    return (pc_target){.fx = &p->fx, .args = &p->args, .prepared = &p->args.prepared, .call = call_op,
                       .prepare = prepare_op, .gather = gather_op, .check = check_op, .problem = p, .ref = r};
}
