/* indexer_prolog_v32 (spec §4.2): validate -> oneDNN matmuls for idx_wq_b, idx_wk, weights_proj and
 * the two Hadamard rotations, with RoPE, LayerNorm, Q8 and the key-cache store as epilogues. */
#include <math.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "internal.h"
#include "linear.h"
#include "primitives.h"
#include "stages.h"

typedef dsops_indexer_prolog_v32_args idxp_args;

#define DR 64

dsops_status dsops_indexer_prolog_v32_init(idxp_args *a, dsops_preset preset)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    a->ln_eps = 1e-6f;
    a->weights_scale = (float)(1.0 / sqrt(64.0 * 128.0));
    a->rope_mode = DSOPS_ROPE_HALF;
    a->rope_inverse = 0;
    if (preset != DSOPS_PRESET_V32)
        return dsops_fail(DSOPS_ERR_PARAM, "preset = %d: indexer_prolog_v32 exists only for DSOPS_PRESET_V32",
                          (int)preset);
    dsops_clear_error();
    return DSOPS_OK;
}

typedef struct idxp_dims {
    int64_t T, H, Q, NI, DI, NB, BS;
    bool int8;           /* int8 variant (int8 qr and idx_wq_b) */
    bool had_q, had_k;   /* Hadamard rotations present */
} idxp_dims;

/* ---- validation ------------------------------------------------------------------------------ */

static dsops_status check_weights(const idxp_args *a, idxp_dims *d)
{
    const unsigned bf16 = DSOPS_DT(DSOPS_BF16), real = DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32);
    if (!a->idx_wq_b.data)
        return dsops_fail(DSOPS_ERR_NULL, "idx_wq_b is NULL (required)");
    d->int8 = a->idx_wq_b.dtype == DSOPS_INT8;
    DSOPS_TRY(dsops_check_tensor(&a->idx_wq_b, "idx_wq_b", 2, bf16 | DSOPS_DT(DSOPS_INT8), true));
    DSOPS_TRY(dsops_check_tensor(&a->idx_wk, "idx_wk", 2, bf16, true));
    d->DI = a->idx_wk.shape[0];
    d->H = a->idx_wk.shape[1];
    d->Q = a->idx_wq_b.shape[1];
    if (d->DI < DR)
        return dsops_fail(DSOPS_ERR_SHAPE, "idx_wk.shape[0] = %lld (DI), expected >= 64", (long long)d->DI);
    if (d->H < 1 || d->Q < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "idx_wk.shape[1] = %lld (H) and idx_wq_b.shape[1] = %lld (Q) must be >= 1",
                          (long long)d->H, (long long)d->Q);
    if (a->idx_wq_b.shape[0] % d->DI != 0 || a->idx_wq_b.shape[0] == 0)
        return dsops_fail(DSOPS_ERR_SHAPE, "idx_wq_b.shape[0] = %lld, expected NI * DI with DI = %lld",
                          (long long)a->idx_wq_b.shape[0], (long long)d->DI);
    d->NI = a->idx_wq_b.shape[0] / d->DI;
    if (d->int8) {
        if (d->Q > 131072)
            return dsops_fail(DSOPS_ERR_SHAPE, "idx_wq_b.shape[1] = %lld (Q), expected <= 131072 for int8", (long long)d->Q);
        DSOPS_TRY(dsops_check_tensor(&a->idx_wq_b_scale, "idx_wq_b_scale", 1, DSOPS_DT(DSOPS_FP32), false));
        DSOPS_TRY(dsops_check_dim(&a->idx_wq_b_scale, "idx_wq_b_scale", 0, d->NI * d->DI, "rows of idx_wq_b"));
    }
    DSOPS_TRY(dsops_check_tensor(&a->weights_proj, "weights_proj", 2, bf16, true));
    DSOPS_TRY(dsops_check_dim(&a->weights_proj, "weights_proj", 0, d->NI, "NI = idx_wq_b.shape[0] / DI"));
    DSOPS_TRY(dsops_check_dim(&a->weights_proj, "weights_proj", 1, d->H, "H of idx_wk"));
    DSOPS_TRY(dsops_check_tensor(&a->ln_gamma_k, "ln_gamma_k", 1, real, false));
    DSOPS_TRY(dsops_check_dim(&a->ln_gamma_k, "ln_gamma_k", 0, d->DI, "DI of idx_wk"));
    DSOPS_TRY(dsops_check_tensor(&a->ln_beta_k, "ln_beta_k", 1, real, false));
    DSOPS_TRY(dsops_check_dim(&a->ln_beta_k, "ln_beta_k", 0, d->DI, "DI of idx_wk"));
    const dsops_tensor *had[2] = {&a->hadamard_q, &a->hadamard_k};
    const char *names[2] = {"hadamard_q", "hadamard_k"};
    for (int i = 0; i < 2; i++) {
        bool present = dsops_tensor_present(had[i]);
        if (!present && d->int8)
            return dsops_fail(DSOPS_ERR_NULL, "%s is NULL (required by the int8 variant)", names[i]);
        if (present) {
            DSOPS_TRY(dsops_check_tensor(had[i], names[i], 2, real, true));
            DSOPS_TRY(dsops_check_dim(had[i], names[i], 0, d->DI, "DI of idx_wk"));
            DSOPS_TRY(dsops_check_dim(had[i], names[i], 1, d->DI, "DI of idx_wk"));
        }
    }
    d->had_q = dsops_tensor_present(&a->hadamard_q);
    d->had_k = dsops_tensor_present(&a->hadamard_k);
    return DSOPS_OK;
}

static dsops_status check_shapes(const idxp_args *a, idxp_dims *d)
{
    const unsigned table = DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32), f16 = DSOPS_DT(DSOPS_FP16);
    DSOPS_TRY(check_weights(a, d));
    dsops_dtype act = d->int8 ? DSOPS_INT8 : DSOPS_BF16;
    DSOPS_TRY(dsops_check_tensor(&a->x, "x", 2, DSOPS_DT(DSOPS_BF16), true));
    d->T = a->x.shape[0];
    DSOPS_TRY(dsops_check_dim(&a->x, "x", 1, d->H, "H of idx_wk"));
    DSOPS_TRY(dsops_check_tensor(&a->qr, "qr", 2, DSOPS_DT(act), true));
    DSOPS_TRY(dsops_check_dim(&a->qr, "qr", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->qr, "qr", 1, d->Q, "Q of idx_wq_b"));
    if (d->int8) {
        DSOPS_TRY(dsops_check_tensor(&a->qr_scale, "qr_scale", 1, DSOPS_DT(DSOPS_FP32), false));
        DSOPS_TRY(dsops_check_dim(&a->qr_scale, "qr_scale", 0, d->T, "T of x"));
    }
    const dsops_tensor *tables[2] = {&a->rope_cos, &a->rope_sin};
    const char *tnames[2] = {"rope_cos", "rope_sin"};
    for (int i = 0; i < 2; i++) {
        DSOPS_TRY(dsops_check_tensor(tables[i], tnames[i], 2, table, true));
        DSOPS_TRY(dsops_check_dim(tables[i], tnames[i], 0, d->T, "T of x"));
        DSOPS_TRY(dsops_check_dim(tables[i], tnames[i], 1, DR, "rotary width"));
    }
    DSOPS_TRY(dsops_check_tensor(&a->cache_index, "cache_index", 1, DSOPS_DT(DSOPS_INT64), false));
    DSOPS_TRY(dsops_check_dim(&a->cache_index, "cache_index", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_tensor(&a->idx_k_cache, "idx_k_cache", 3, DSOPS_DT(act), true));
    d->NB = a->idx_k_cache.shape[0];
    d->BS = a->idx_k_cache.shape[1];
    if (d->NB < 1 || d->BS < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "idx_k_cache has NB = %lld, BS = %lld, expected both >= 1", (long long)d->NB,
                          (long long)d->BS);
    DSOPS_TRY(dsops_check_dim(&a->idx_k_cache, "idx_k_cache", 2, d->DI, "DI of idx_wk"));
    if (d->int8) {
        DSOPS_TRY(dsops_check_tensor(&a->idx_k_scale_cache, "idx_k_scale_cache", 2, f16, false));
        DSOPS_TRY(dsops_check_dim(&a->idx_k_scale_cache, "idx_k_scale_cache", 0, d->NB, "NB of idx_k_cache"));
        DSOPS_TRY(dsops_check_dim(&a->idx_k_scale_cache, "idx_k_scale_cache", 1, d->BS, "BS of idx_k_cache"));
    }
    DSOPS_TRY(dsops_check_tensor(&a->q_idx, "q_idx", 3, DSOPS_DT(act), true));
    DSOPS_TRY(dsops_check_dim(&a->q_idx, "q_idx", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->q_idx, "q_idx", 1, d->NI, "NI of idx_wq_b"));
    DSOPS_TRY(dsops_check_dim(&a->q_idx, "q_idx", 2, d->DI, "DI of idx_wk"));
    if (d->int8) {
        DSOPS_TRY(dsops_check_tensor(&a->q_idx_scale, "q_idx_scale", 2, f16, false));
        DSOPS_TRY(dsops_check_dim(&a->q_idx_scale, "q_idx_scale", 0, d->T, "T of x"));
        DSOPS_TRY(dsops_check_dim(&a->q_idx_scale, "q_idx_scale", 1, d->NI, "NI of idx_wq_b"));
    }
    DSOPS_TRY(dsops_check_tensor(&a->weights, "weights", 2, DSOPS_DT(d->int8 ? DSOPS_FP16 : DSOPS_BF16), false));
    DSOPS_TRY(dsops_check_dim(&a->weights, "weights", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->weights, "weights", 1, d->NI, "NI of idx_wq_b"));
    return DSOPS_OK;
}

static dsops_status check_params(const idxp_args *a)
{
    if (!isfinite(a->ln_eps) || a->ln_eps < 0)
        return dsops_fail(DSOPS_ERR_PARAM, "ln_eps = %g, expected finite and >= 0", (double)a->ln_eps);
    if (!isfinite(a->weights_scale))
        return dsops_fail(DSOPS_ERR_PARAM, "weights_scale = %g is not finite", (double)a->weights_scale);
    if ((int)a->rope_mode < 0 || (int)a->rope_mode > DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT)
        return dsops_fail(DSOPS_ERR_PARAM, "rope_mode = %d is not a dsops_rope_mode value", (int)a->rope_mode);
    return DSOPS_OK;
}

static dsops_status check_aliasing(const idxp_args *a)
{
    const dsops_named_tensor outs[] = {
        {&a->q_idx, "q_idx"}, {&a->q_idx_scale, "q_idx_scale"}, {&a->weights, "weights"},
        {&a->idx_k_cache, "idx_k_cache"}, {&a->idx_k_scale_cache, "idx_k_scale_cache"}};
    const dsops_named_tensor ins[] = {
        {&a->x, "x"}, {&a->qr, "qr"}, {&a->qr_scale, "qr_scale"}, {&a->idx_wq_b, "idx_wq_b"},
        {&a->idx_wq_b_scale, "idx_wq_b_scale"}, {&a->idx_wk, "idx_wk"}, {&a->weights_proj, "weights_proj"},
        {&a->ln_gamma_k, "ln_gamma_k"}, {&a->ln_beta_k, "ln_beta_k"}, {&a->rope_cos, "rope_cos"},
        {&a->rope_sin, "rope_sin"}, {&a->hadamard_q, "hadamard_q"}, {&a->hadamard_k, "hadamard_k"},
        {&a->cache_index, "cache_index"}};
    return dsops_check_outputs_apart(outs, sizeof outs / sizeof outs[0], ins, sizeof ins / sizeof ins[0]);
}

/* ---- prepared weights ------------------------------------------------------------------------ */

/* Map k: 0 idx_wq_b, 1 idx_wk, 2 weights_proj, 3 hadamard_q, 4 hadamard_k (absent: no map). A
 * Hadamard matrix Hm is applied as v Hm, i.e. W[n][k] = Hm[k][n]. */
enum { MAP_WQ_B, MAP_WK, MAP_WPROJ, MAP_HQ, MAP_HK, MAP_COUNT };

static bool map_source(const idxp_args *a, const idxp_dims *d, int k, const void **w, dsops_dtype *dt, int64_t *N,
                       int64_t *K, int64_t *sn, int64_t *sk)
{
    const dsops_tensor *t = k == MAP_WQ_B ? &a->idx_wq_b : k == MAP_WK ? &a->idx_wk : k == MAP_WPROJ ? &a->weights_proj
                            : k == MAP_HQ  ? &a->hadamard_q
                                           : &a->hadamard_k;
    if (!dsops_tensor_present(t))
        return false;
    *w = t->data;
    *dt = t->dtype;
    if (k >= MAP_HQ) {
        *N = *K = d->DI;
        *sn = 1;
        *sk = t->stride[0];
    } else {
        *N = t->shape[0];
        *K = t->shape[1];
        *sn = t->stride[0];
        *sk = 1;
    }
    return true;
}

static dsops_status prepare_maps(const idxp_args *a, const idxp_dims *d, int threads, dsops_prepared **out)
{
    *out = NULL;
    dsops_prepared *p = calloc(1, sizeof *p);
    if (!p || !(p->maps = calloc(MAP_COUNT, sizeof *p->maps))) {
        free(p);
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate prepared weights");
    }
    p->op = "indexer_prolog_v32";
    p->count = MAP_COUNT;
    dsops_status s = dsops_linear_engine_create(&p->engine);
    for (int k = 0; s == DSOPS_OK && k < MAP_COUNT; k++) {
        const void *w;
        dsops_dtype dt;
        int64_t N, K, sn, sk;
        if (map_source(a, d, k, &w, &dt, &N, &K, &sn, &sk))
            s = dsops_linear_create(p->engine, w, dt, N, K, sn, sk, threads, &p->maps[k]);
    }
    if (s != DSOPS_OK) {
        dsops_prepared_destroy(p);
        return s;
    }
    *out = p;
    return DSOPS_OK;
}

static dsops_status check_prepared(const idxp_args *a, const idxp_dims *d)
{
    const dsops_prepared *p = a->prepared;
    if (!p)
        return DSOPS_OK;
    if (p->count != MAP_COUNT || strcmp(p->op, "indexer_prolog_v32") != 0)
        return dsops_fail(DSOPS_ERR_PARAM, "prepared was made for %s, not for indexer_prolog_v32", p->op);
    static const char *names[MAP_COUNT] = {"idx_wq_b", "idx_wk", "weights_proj", "hadamard_q", "hadamard_k"};
    for (int k = 0; k < MAP_COUNT; k++) {
        const void *w;
        dsops_dtype dt;
        int64_t N, K, sn, sk;
        bool present = map_source(a, d, k, &w, &dt, &N, &K, &sn, &sk);
        if (present != (p->maps[k] != NULL) || (present && !dsops_linear_matches(p->maps[k], w, dt, N, K, sn, sk)))
            return dsops_fail(DSOPS_ERR_PARAM, "prepared was made from another %s", names[k]);
    }
    return DSOPS_OK;
}

dsops_status dsops_indexer_prolog_v32_prepare(dsops_context *ctx, const idxp_args *a, dsops_prepared **out)
{
    if (!a || !out)
        return dsops_fail(DSOPS_ERR_NULL, "%s is NULL", a ? "prepared" : "args");
    *out = NULL;
    idxp_dims d;
    DSOPS_TRY(check_weights(a, &d));
    int threads = 1;
    DSOPS_TRY(dsops_context_thread_count(ctx, &threads));
    DSOPS_TRY(prepare_maps(a, &d, threads, out));
    dsops_clear_error();
    return DSOPS_OK;
}

/* ---- execution ------------------------------------------------------------------------------- */

typedef struct idxp_layout {
    size_t slots, k, w, qacc, u, hq, kr, hk, wscale, total;
} idxp_layout;

/* u and kr hold the Hadamard inputs in the matrices' dtype (fp32 or bf16 values). */
static idxp_layout make_layout(const idxp_dims *d)
{
    idxp_layout L;
    size_t T = (size_t)d->T, NI = (size_t)d->NI, DI = (size_t)d->DI, off = 0;
    L.slots = off; off += dsops_align64(dsops_cache_slots_scratch_bytes(d->T));
    L.k = off;     off += dsops_align64(T * DI * 4);        /* [T, DI] fp32 key projection */
    L.w = off;     off += dsops_align64(T * NI * 4);        /* [T, NI] fp32 weights projection */
    L.qacc = off;  off += dsops_align64(T * NI * DI * 4);   /* [T, NI*DI] fp32 / int32 */
    L.u = off;     off += dsops_align64(T * NI * DI * 4);   /* [T*NI, DI] rotated queries */
    L.hq = off;    off += dsops_align64(T * NI * DI * 4);   /* [T*NI, DI] fp32 after hadamard_q */
    L.kr = off;    off += dsops_align64(T * DI * 4);        /* [T, DI] rotated keys */
    L.hk = off;    off += dsops_align64(T * DI * 4);        /* [T, DI] fp32 after hadamard_k */
    L.wscale = off; off += dsops_align64(NI * DI * 4);      /* [NI*DI] idx_wq_b_scale, dense */
    L.total = off;
    return L;
}

/* Stores a row of bf16 values as the Hadamard input dtype (bf16 or fp32, exact either way). */
static void put_row(const uint16_t *v, int64_t n, dsops_dtype dt, void *dst)
{
    if (dt == DSOPS_FP32)
        dsops_bf16_to_fp32(v, (float *)dst, (size_t)n);
    else
        memcpy(dst, v, (size_t)n * 2);
}

/* Reads back a row stored by put_row, or the fp32 result of a Hadamard map, as bf16. */
static void get_bf16_row(const void *src, int64_t n, bool fp32_values, uint16_t *dst)
{
    if (fp32_values)
        for (int64_t i = 0; i < n; i++)
            dst[i] = dsops_bf16_round_bits(((const float *)src)[i]);
    else
        memcpy(dst, src, (size_t)n * 2);
}


/* bf16 rotation of the first 64 values of row (in place) with token t's tables. */
static void rope_first64(const idxp_args *a, int64_t t, uint16_t *row)
{
    dsops_rope_bf16_slice(row, &a->rope_cos, &a->rope_sin, t, a->rope_mode, a->rope_inverse != 0, row);
}

/* Every check but the cache slots (those need scratch). */
static dsops_status check_all(const idxp_args *a, idxp_dims *d)
{
    DSOPS_TRY(check_shapes(a, d));
    DSOPS_TRY(check_params(a));
    DSOPS_TRY(check_aliasing(a));
    return check_prepared(a, d);
}

dsops_status dsops_indexer_prolog_v32_validate(const idxp_args *a, void *slot_scratch)
{
    idxp_dims d;
    DSOPS_TRY(check_all(a, &d));
    return dsops_check_cache_slots(&a->cache_index, d.NB * d.BS, slot_scratch);
}

dsops_status dsops_indexer_prolog_v32(dsops_context *ctx, const idxp_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    idxp_dims d;
    DSOPS_TRY(check_all(a, &d));
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    idxp_layout L = make_layout(&d);
    int64_t T = d.T, NI = d.NI, DI = d.DI;
    size_t norm_bytes = dsops_align64((size_t)DI * 8);
    size_t per_thread = dsops_align64((size_t)DI * 2) + dsops_align64((size_t)DI * 4); /* a bf16 and an fp32 row */
    char *scratch = dsops_scratch(use, L.total + norm_bytes + per_thread * (size_t)use->threads);
    dsops_status status =
        scratch ? dsops_check_cache_slots(&a->cache_index, d.NB * d.BS, scratch + L.slots) : DSOPS_ERR_NOMEM;
    const dsops_prepared *prep = a->prepared;
    dsops_prepared *own = NULL;
    if (status == DSOPS_OK && T > 0 && !prep) {
        status = prepare_maps(a, &d, use->threads, &own);
        prep = own;
    }
    if (status != DSOPS_OK || T == 0) {
        dsops_prepared_destroy(own);
        dsops_context_end(ctx, use);
        if (status == DSOPS_OK)
            dsops_clear_error();
        return status;
    }
    /* nothing is written above this line */
    int threads = use->threads;
    float *gamma = (float *)(scratch + L.total), *beta = gamma + DI;
    dsops_widen_vector(&a->ln_gamma_k, (int)DI, gamma);
    dsops_widen_vector(&a->ln_beta_k, (int)DI, beta);
    dsops_dtype hq_dt = d.had_q ? a->hadamard_q.dtype : DSOPS_BF16, hk_dt = d.had_k ? a->hadamard_k.dtype : DSOPS_BF16;
    size_t hq_es = dsops_elem_size(hq_dt), hk_es = dsops_elem_size(hk_dt);

    /* projections: qb from qr, the key and the weights from x */
    dsops_linear_job j1[3] = {{prep->maps[MAP_WQ_B], a->qr.data, a->qr.stride[0], scratch + L.qacc, NI * DI},
                              {prep->maps[MAP_WK], a->x.data, a->x.stride[0], scratch + L.k, DI},
                              {prep->maps[MAP_WPROJ], a->x.data, a->x.stride[0], scratch + L.w, NI}};
    status = dsops_linear_run(use, j1, 3, T, threads, use->isa);

    float *wscale = (float *)(scratch + L.wscale);
    if (d.int8)
        for (int64_t n = 0; n < NI * DI; n++)
            wscale[n] = *(const float *)dsops_at1(&a->idx_wq_b_scale, n);
    /* per token: qb (bf16) and its rotated heads u; the normalised, rotated key; the weights */
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < T; t++) {
        uint16_t *row = (uint16_t *)(scratch + L.total + norm_bytes + per_thread * (size_t)dsops_thread_num());
        float c[DR], sn[DR], x[DR], y[DR]; /* the token's tables, widened once for all heads */
        dsops_widen_row(dsops_at2(&a->rope_cos, t, 0), a->rope_cos.dtype, DR, c);
        dsops_widen_row(dsops_at2(&a->rope_sin, t, 0), a->rope_sin.dtype, DR, sn);
        for (int64_t h = 0; h < NI; h++) {
            int64_t base = t * NI * DI + h * DI;
            if (d.int8) {
                const int32_t *acc = (const int32_t *)(scratch + L.qacc) + base;
                float qs = *(const float *)dsops_at1(&a->qr_scale, t);
                const float *ws = wscale + h * DI;
                for (int64_t e = 0; e < DI; e++)
                    row[e] = dsops_bf16_round_bits(((float)acc[e] * qs) * ws[e]);
            } else {
                const float *acc = (const float *)(scratch + L.qacc) + base;
                for (int64_t e = 0; e < DI; e++)
                    row[e] = dsops_bf16_round_bits(acc[e]);
            }
            for (int e = 0; e < DR; e++)
                x[e] = dsops_bf16_value(row[e]);
            dsops_rope_row(x, c, sn, a->rope_mode, a->rope_inverse != 0, y);
            for (int e = 0; e < DR; e++)
                row[e] = dsops_bf16_round_bits(y[e]);
            put_row(row, DI, hq_dt, scratch + L.u + (size_t)base * hq_es);
        }
        float *k = (float *)(scratch + L.k) + t * DI;
        dsops_layernorm_row(k, (int)DI, gamma, beta, a->ln_eps, k);   /* LayerNorm of the fp32 projection */
        for (int64_t c = 0; c < DI; c++)
            row[c] = dsops_bf16_round_bits(k[c]);
        rope_first64(a, t, row);
        put_row(row, DI, hk_dt, scratch + L.kr + (size_t)(t * DI) * hk_es);
        for (int64_t h = 0; h < NI; h++) {
            float w = dsops_round_bf16(((const float *)(scratch + L.w))[t * NI + h]) * a->weights_scale;
            uint16_t *dst = dsops_at2(&a->weights, t, h);
            *dst = d.int8 ? dsops_fp16_round_bits(w) : dsops_bf16_round_bits(w);
        }
    }
    /* Hadamard rotations: every head row of every token by hadamard_q, every key by hadamard_k */
    if (status == DSOPS_OK && d.had_q) {
        dsops_linear_job jq = {prep->maps[MAP_HQ], scratch + L.u, DI, scratch + L.hq, DI};
        status = dsops_linear_run(use, &jq, 1, T * NI, threads, use->isa);
    }
    if (status == DSOPS_OK && d.had_k) {
        dsops_linear_job jk = {prep->maps[MAP_HK], scratch + L.kr, DI, scratch + L.hk, DI};
        status = dsops_linear_run(use, &jk, 1, T, threads, use->isa);
    }
    if (status == DSOPS_OK) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t t = 0; t < T; t++) {
            char *mine = scratch + L.total + norm_bytes + per_thread * (size_t)dsops_thread_num();
            uint16_t *row = (uint16_t *)mine;
            float *f = (float *)(mine + dsops_align64((size_t)DI * 2));
            for (int64_t h = 0; h < NI; h++) {
                int64_t base = t * NI * DI + h * DI;
                if (d.int8) { /* int8 always has hadamard_q: Q8 of the bf16-rounded rotation */
                    const float *hq = (const float *)(scratch + L.hq) + base;
                    float s;
                    for (int64_t e = 0; e < DI; e++)
                        f[e] = dsops_round_bf16(hq[e]);
                    dsops_q8_group(f, (int)DI, (int8_t *)dsops_at3(&a->q_idx, t, h, 0), &s);
                    *(uint16_t *)dsops_at2(&a->q_idx_scale, t, h) = dsops_fp16_round_bits(s);
                    continue;
                }
                if (d.had_q)
                    get_bf16_row((const float *)(scratch + L.hq) + base, DI, true, row);
                else
                    get_bf16_row(scratch + L.u + (size_t)base * hq_es, DI, hq_dt == DSOPS_FP32, row);
                memcpy(dsops_at3(&a->q_idx, t, h, 0), row, (size_t)DI * 2);
            }
        }
        /* key cache rows (slots were checked distinct) */
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t t = 0; t < T; t++) {
            int64_t r = *(const int64_t *)dsops_at1(&a->cache_index, t);
            if (r < 0)
                continue;
            int64_t blk = r / d.BS, off = r % d.BS;
            char *mine = scratch + L.total + norm_bytes + per_thread * (size_t)dsops_thread_num();
            uint16_t *kk = (uint16_t *)mine;
            float *f = (float *)(mine + dsops_align64((size_t)DI * 2));
            if (d.had_k)
                get_bf16_row((const float *)(scratch + L.hk) + t * DI, DI, true, kk);
            else
                get_bf16_row(scratch + L.kr + (size_t)(t * DI) * hk_es, DI, hk_dt == DSOPS_FP32, kk);
            if (d.int8) {
                float s;
                dsops_bf16_to_fp32(kk, f, (size_t)DI);
                dsops_q8_group(f, (int)DI, (int8_t *)dsops_at3(&a->idx_k_cache, blk, off, 0), &s);
                *(uint16_t *)dsops_at2(&a->idx_k_scale_cache, blk, off) = dsops_fp16_round_bits(s);
            } else {
                memcpy(dsops_at3(&a->idx_k_cache, blk, off, 0), kk, (size_t)DI * 2);
            }
        }
    }
    dsops_prepared_destroy(own);
    dsops_context_end(ctx, use);
    if (status == DSOPS_OK)
        dsops_clear_error();
    return status;
}
