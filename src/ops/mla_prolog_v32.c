/* mla_prolog_v32 (spec §4.1): validate -> oneDNN matmuls for wq_a / wkv_a, wq_b and the absorbed
 * w_uk, with the norms, RoPE, quantisation and cache stores as epilogues in dsops's own code. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "linear.h"
#include "primitives.h"
#include "stages.h"

typedef dsops_mla_prolog_v32_args mlap_args;

#define DR 64               /* rotary dims (fixed, spec §1.2) */
#define INT8_GROUP 128      /* latent quantisation group */
#define PACKED_ROW 656

dsops_status dsops_mla_prolog_v32_init(mlap_args *a, dsops_preset preset)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    a->eps_cq = a->eps_ckv = 1e-6f;
    a->rope_mode = DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT;
    a->rope_inverse = 0;
    a->kv_layout = DSOPS_KV_SPLIT_BF16;
    if (preset != DSOPS_PRESET_V32)
        return dsops_fail(DSOPS_ERR_PARAM, "preset = %d: mla_prolog_v32 exists only for DSOPS_PRESET_V32", (int)preset);
    dsops_clear_error();
    return DSOPS_OK;
}

typedef struct mlap_dims {
    int64_t T, H, Q, N, Dqn, Dc, G, NB, BS;  /* G = Dqn + 64: rows of wq_b per head */
    bool int8w;                              /* int8 wq_b */
} mlap_dims;

/* ---- validation ------------------------------------------------------------------------------ */

/* The weights: shapes, dtypes and unit inner strides (they are handed to oneDNN). */
static dsops_status check_weights(const mlap_args *a, mlap_dims *d)
{
    const unsigned bf16 = DSOPS_DT(DSOPS_BF16), norm = DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32);
    DSOPS_TRY(dsops_check_tensor(&a->wq_a, "wq_a", 2, bf16, true));
    d->Q = a->wq_a.shape[0];
    d->H = a->wq_a.shape[1];
    DSOPS_TRY(dsops_check_tensor(&a->w_uk, "w_uk", 3, bf16, true));
    d->N = a->w_uk.shape[0];
    d->Dqn = a->w_uk.shape[1];
    d->Dc = a->w_uk.shape[2];
    d->G = d->Dqn + DR;
    if (d->Q < 1 || d->H < 1 || d->N < 1 || d->Dqn < 1 || d->Dc < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "wq_a [%lld, %lld] and w_uk [%lld, %lld, %lld] need every extent >= 1",
                          (long long)d->Q, (long long)d->H, (long long)d->N, (long long)d->Dqn, (long long)d->Dc);
    if (!a->wq_b.data)
        return dsops_fail(DSOPS_ERR_NULL, "wq_b is NULL (required)");
    d->int8w = a->wq_b.dtype == DSOPS_INT8;
    DSOPS_TRY(dsops_check_tensor(&a->wq_b, "wq_b", 2, bf16 | DSOPS_DT(DSOPS_INT8), true));
    DSOPS_TRY(dsops_check_dim(&a->wq_b, "wq_b", 0, d->N * d->G, "N * (Dqn + 64) from w_uk"));
    DSOPS_TRY(dsops_check_dim(&a->wq_b, "wq_b", 1, d->Q, "Q of wq_a"));
    if (d->int8w) {
        if (d->Q > 131072)
            return dsops_fail(DSOPS_ERR_SHAPE, "wq_a.shape[0] = %lld (Q), expected <= 131072 for int8 wq_b", (long long)d->Q);
        DSOPS_TRY(dsops_check_tensor(&a->wq_b_scale, "wq_b_scale", 1, DSOPS_DT(DSOPS_FP32), false));
        DSOPS_TRY(dsops_check_dim(&a->wq_b_scale, "wq_b_scale", 0, d->N * d->G, "rows of wq_b"));
    }
    DSOPS_TRY(dsops_check_tensor(&a->wkv_a, "wkv_a", 2, bf16, true));
    DSOPS_TRY(dsops_check_dim(&a->wkv_a, "wkv_a", 0, d->Dc + DR, "Dc + 64 from w_uk"));
    DSOPS_TRY(dsops_check_dim(&a->wkv_a, "wkv_a", 1, d->H, "H of wq_a"));
    DSOPS_TRY(dsops_check_tensor(&a->gamma_cq, "gamma_cq", 1, norm, false));
    DSOPS_TRY(dsops_check_dim(&a->gamma_cq, "gamma_cq", 0, d->Q, "Q of wq_a"));
    DSOPS_TRY(dsops_check_tensor(&a->gamma_ckv, "gamma_ckv", 1, norm, false));
    DSOPS_TRY(dsops_check_dim(&a->gamma_ckv, "gamma_ckv", 0, d->Dc, "Dc of w_uk"));
    return DSOPS_OK;
}

static dsops_status check_cache(const dsops_tensor *t, const char *name, dsops_dtype dt, int64_t w, mlap_dims *d,
                                bool first)
{
    DSOPS_TRY(dsops_check_tensor(t, name, 3, DSOPS_DT(dt), true));
    if (first) {
        d->NB = t->shape[0];
        d->BS = t->shape[1];
        if (d->NB < 1 || d->BS < 1)
            return dsops_fail(DSOPS_ERR_SHAPE, "%s has NB = %lld, BS = %lld, expected both >= 1", name,
                              (long long)d->NB, (long long)d->BS);
    }
    DSOPS_TRY(dsops_check_dim(t, name, 0, d->NB, "NB of the first cache"));
    DSOPS_TRY(dsops_check_dim(t, name, 1, d->BS, "BS of the first cache"));
    return dsops_check_dim(t, name, 2, w, "row width");
}

static dsops_status check_shapes(const mlap_args *a, mlap_dims *d)
{
    const unsigned bf16 = DSOPS_DT(DSOPS_BF16), table = DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32);
    DSOPS_TRY(check_weights(a, d));
    DSOPS_TRY(dsops_check_tensor(&a->x, "x", 2, bf16, true));
    d->T = a->x.shape[0];
    DSOPS_TRY(dsops_check_dim(&a->x, "x", 1, d->H, "H of wq_a"));
    DSOPS_TRY(dsops_check_tensor(&a->rope_cos, "rope_cos", 2, table, true));
    DSOPS_TRY(dsops_check_dim(&a->rope_cos, "rope_cos", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->rope_cos, "rope_cos", 1, DR, "rotary width"));
    DSOPS_TRY(dsops_check_tensor(&a->rope_sin, "rope_sin", 2, table, true));
    DSOPS_TRY(dsops_check_dim(&a->rope_sin, "rope_sin", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->rope_sin, "rope_sin", 1, DR, "rotary width"));
    DSOPS_TRY(dsops_check_tensor(&a->cache_index, "cache_index", 1, DSOPS_DT(DSOPS_INT64), false));
    DSOPS_TRY(dsops_check_dim(&a->cache_index, "cache_index", 0, d->T, "T of x"));
    switch (a->kv_layout) {
    case DSOPS_KV_SPLIT_BF16:
        DSOPS_TRY(check_cache(&a->kv_cache, "kv_cache", DSOPS_BF16, d->Dc, d, true));
        DSOPS_TRY(check_cache(&a->kr_cache, "kr_cache", DSOPS_BF16, DR, d, false));
        break;
    case DSOPS_KV_SPLIT_INT8:
        if (d->Dc % INT8_GROUP)
            return dsops_fail(DSOPS_ERR_SHAPE, "w_uk.shape[2] = %lld (Dc), expected a multiple of 128 (split_int8)",
                              (long long)d->Dc);
        DSOPS_TRY(check_cache(&a->kv_cache, "kv_cache", DSOPS_INT8, d->Dc, d, true));
        DSOPS_TRY(check_cache(&a->kv_scale_cache, "kv_scale_cache", DSOPS_FP32, d->Dc / INT8_GROUP, d, false));
        DSOPS_TRY(check_cache(&a->kr_cache, "kr_cache", DSOPS_BF16, DR, d, false));
        break;
    case DSOPS_KV_PACKED_INT8:
        if (d->Dc != 512)
            return dsops_fail(DSOPS_ERR_SHAPE, "w_uk.shape[2] = %lld (Dc), expected 512 (packed_int8)", (long long)d->Dc);
        DSOPS_TRY(check_cache(&a->kv_packed, "kv_packed", DSOPS_UINT8, PACKED_ROW, d, true));
        break;
    case DSOPS_KV_FLASHMLA_FP8:
        if (d->Dc != 512)
            return dsops_fail(DSOPS_ERR_SHAPE, "w_uk.shape[2] = %lld (Dc), expected 512 (flashmla_fp8)", (long long)d->Dc);
        DSOPS_TRY(check_cache(&a->kv_packed, "kv_packed", DSOPS_UINT8, PACKED_ROW, d, true));
        break;
    default:
        return dsops_fail(DSOPS_ERR_PARAM, "kv_layout = %d is not a dsops_kv_layout value", (int)a->kv_layout);
    }
    DSOPS_TRY(dsops_check_tensor(&a->q_nope, "q_nope", 3, bf16, true));
    DSOPS_TRY(dsops_check_dim(&a->q_nope, "q_nope", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->q_nope, "q_nope", 1, d->N, "N of w_uk"));
    DSOPS_TRY(dsops_check_dim(&a->q_nope, "q_nope", 2, d->Dc, "Dc of w_uk"));
    DSOPS_TRY(dsops_check_tensor(&a->q_rope, "q_rope", 3, bf16, true));
    DSOPS_TRY(dsops_check_dim(&a->q_rope, "q_rope", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->q_rope, "q_rope", 1, d->N, "N of w_uk"));
    DSOPS_TRY(dsops_check_dim(&a->q_rope, "q_rope", 2, DR, "rotary width"));
    DSOPS_TRY(dsops_check_tensor(&a->qr, "qr", 2, DSOPS_DT(d->int8w ? DSOPS_INT8 : DSOPS_BF16), true));
    DSOPS_TRY(dsops_check_dim(&a->qr, "qr", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->qr, "qr", 1, d->Q, "Q of wq_a"));
    if (d->int8w) {
        DSOPS_TRY(dsops_check_tensor(&a->qr_scale, "qr_scale", 1, DSOPS_DT(DSOPS_FP32), false));
        DSOPS_TRY(dsops_check_dim(&a->qr_scale, "qr_scale", 0, d->T, "T of x"));
    }
    return DSOPS_OK;
}

static dsops_status check_params(const mlap_args *a)
{
    if (!isfinite(a->eps_cq) || a->eps_cq < 0)
        return dsops_fail(DSOPS_ERR_PARAM, "eps_cq = %g, expected finite and >= 0", (double)a->eps_cq);
    if (!isfinite(a->eps_ckv) || a->eps_ckv < 0)
        return dsops_fail(DSOPS_ERR_PARAM, "eps_ckv = %g, expected finite and >= 0", (double)a->eps_ckv);
    if ((int)a->rope_mode < 0 || (int)a->rope_mode > DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT)
        return dsops_fail(DSOPS_ERR_PARAM, "rope_mode = %d is not a dsops_rope_mode value", (int)a->rope_mode);
    return DSOPS_OK;
}

static dsops_status check_aliasing(const mlap_args *a)
{
    const dsops_named_tensor outs[] = {
        {&a->q_nope, "q_nope"}, {&a->q_rope, "q_rope"}, {&a->qr, "qr"}, {&a->qr_scale, "qr_scale"},
        {&a->kv_cache, "kv_cache"}, {&a->kv_scale_cache, "kv_scale_cache"}, {&a->kr_cache, "kr_cache"},
        {&a->kv_packed, "kv_packed"}};
    const dsops_named_tensor ins[] = {
        {&a->x, "x"}, {&a->wq_a, "wq_a"}, {&a->gamma_cq, "gamma_cq"}, {&a->wq_b, "wq_b"},
        {&a->wq_b_scale, "wq_b_scale"}, {&a->w_uk, "w_uk"}, {&a->wkv_a, "wkv_a"}, {&a->gamma_ckv, "gamma_ckv"},
        {&a->rope_cos, "rope_cos"}, {&a->rope_sin, "rope_sin"}, {&a->cache_index, "cache_index"}};
    return dsops_check_outputs_apart(outs, sizeof outs / sizeof outs[0], ins, sizeof ins / sizeof ins[0]);
}

/* ---- prepared weights ------------------------------------------------------------------------ */

/* Map k of a prepared object: 0 wq_a, 1 wkv_a, 2 wq_b, 3 + h w_uk[h]. */
static dsops_status map_source(const mlap_args *a, const mlap_dims *d, int k, const void **w, dsops_dtype *dt,
                               int64_t *N, int64_t *K, int64_t *sn, int64_t *sk)
{
    *sk = 1;
    switch (k) {
    case 0: *w = a->wq_a.data; *dt = DSOPS_BF16; *N = d->Q; *K = d->H; *sn = a->wq_a.stride[0]; break;
    case 1: *w = a->wkv_a.data; *dt = DSOPS_BF16; *N = d->Dc + DR; *K = d->H; *sn = a->wkv_a.stride[0]; break;
    case 2: *w = a->wq_b.data; *dt = a->wq_b.dtype; *N = d->N * d->G; *K = d->Q; *sn = a->wq_b.stride[0]; break;
    default: /* w_uk[h] is [Dqn, Dc] = [K, N] */
        *w = dsops_at3(&a->w_uk, k - 3, 0, 0);
        *dt = DSOPS_BF16;
        *N = d->Dc;
        *K = d->Dqn;
        *sn = 1;
        *sk = a->w_uk.stride[1];
        break;
    }
    return DSOPS_OK;
}

static dsops_status prepare_maps(const mlap_args *a, const mlap_dims *d, int threads, dsops_prepared **out)
{
    *out = NULL;
    dsops_prepared *p = calloc(1, sizeof *p);
    int count = (int)(3 + d->N);
    if (!p || !(p->maps = calloc((size_t)count, sizeof *p->maps))) {
        free(p);
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate prepared weights");
    }
    p->op = "mla_prolog_v32";
    dsops_status es = dsops_linear_engine_create(&p->engine);
    if (es != DSOPS_OK) {
        dsops_prepared_destroy(p);
        return es;
    }
    p->count = count;
    for (int k = 0; k < count; k++) {
        const void *w;
        dsops_dtype dt;
        int64_t N, K, sn, sk;
        map_source(a, d, k, &w, &dt, &N, &K, &sn, &sk);
        dsops_status s = dsops_linear_create(p->engine, w, dt, N, K, sn, sk, threads, &p->maps[k]);
        if (s != DSOPS_OK) {
            dsops_prepared_destroy(p);
            return s;
        }
    }
    *out = p;
    return DSOPS_OK;
}

static dsops_status check_prepared(const mlap_args *a, const mlap_dims *d)
{
    const dsops_prepared *p = a->prepared;
    if (!p)
        return DSOPS_OK;
    if (p->count != 3 + d->N || strcmp(p->op, "mla_prolog_v32") != 0)
        return dsops_fail(DSOPS_ERR_PARAM, "prepared was made for %s with %d maps, not for these weights", p->op,
                          p->count);
    static const char *names[] = {"wq_a", "wkv_a", "wq_b"};
    for (int k = 0; k < p->count; k++) {
        const void *w;
        dsops_dtype dt;
        int64_t N, K, sn, sk;
        map_source(a, d, k, &w, &dt, &N, &K, &sn, &sk);
        if (!dsops_linear_matches(p->maps[k], w, dt, N, K, sn, sk))
            return dsops_fail(DSOPS_ERR_PARAM, "prepared was made from another %s%s", k < 3 ? names[k] : "w_uk",
                              k < 3 ? "" : " head");
    }
    return DSOPS_OK;
}

dsops_status dsops_mla_prolog_v32_prepare(dsops_context *ctx, const mlap_args *a, dsops_prepared **out)
{
    if (!a || !out)
        return dsops_fail(DSOPS_ERR_NULL, "%s is NULL", a ? "prepared" : "args");
    *out = NULL;
    mlap_dims d;
    DSOPS_TRY(check_weights(a, &d));
    int threads = 1;
    DSOPS_TRY(dsops_context_thread_count(ctx, &threads));
    DSOPS_TRY(prepare_maps(a, &d, threads, out));
    dsops_clear_error();
    return DSOPS_OK;
}

/* ---- execution ------------------------------------------------------------------------------- */

/* Scratch areas of one call (byte offsets). */
typedef struct mlap_layout {
    size_t slots, a, kva, cq, qr8, qrs, qbacc, qb, qn, wscale, total;
    int64_t head_group;  /* heads whose absorbed products are held at once */
} mlap_layout;

static mlap_layout make_layout(const mlap_dims *d)
{
    mlap_layout L;
    size_t T = (size_t)d->T, off = 0;
    L.head_group = (int64_t)((8u << 20) / (T * (size_t)d->Dc * 4 + 1));
    if (L.head_group < 1)
        L.head_group = 1;
    if (L.head_group > d->N)
        L.head_group = d->N;
    L.slots = off; off += dsops_align64(dsops_cache_slots_scratch_bytes(d->T));
    L.a = off;     off += dsops_align64(T * (size_t)d->Q * 4);             /* [T, Q] fp32 */
    L.kva = off;   off += dsops_align64(T * (size_t)(d->Dc + DR) * 4);    /* [T, Dc+64] fp32 */
    L.cq = off;    off += dsops_align64(T * (size_t)d->Q * 2);             /* [T, Q] bf16 */
    L.qr8 = off;   off += dsops_align64(T * (size_t)d->Q);                 /* [T, Q] int8 */
    L.qrs = off;   off += dsops_align64(T * 4);                            /* [T] */
    L.qbacc = off; off += dsops_align64(T * (size_t)(d->N * d->G) * 4);    /* [T, N*G] fp32 / int32 */
    L.qb = off;    off += dsops_align64(T * (size_t)(d->N * d->G) * 2);    /* [T, N*G] bf16 */
    L.qn = off;    off += dsops_align64((size_t)L.head_group * T * (size_t)d->Dc * 4); /* [hg][T][Dc] fp32 */
    L.wscale = off; off += dsops_align64((size_t)(d->N * d->G) * 4);      /* [N*G] wq_b_scale, dense */
    L.total = off;
    return L;
}

static void rope_bf16(const mlap_args *a, int64_t t, const uint16_t *src, uint16_t *dst)
{
    dsops_rope_bf16_slice(src, &a->rope_cos, &a->rope_sin, t, a->rope_mode, a->rope_inverse != 0, dst);
}

/* Steps 1-2 of one token: cq (and qr / qr_scale) from a; ckv and krope from kva (kept in scratch
 * until the cache stores). */
static void norms_of_token(const mlap_args *a, const mlap_dims *d, const mlap_layout *L, char *scratch, int64_t t,
                           float *gcq, float *gckv, uint16_t *ckv_out, uint16_t *krope_out)
{
    int64_t Q = d->Q, Dc = d->Dc;
    float *arow = (float *)(scratch + L->a) + t * Q;
    for (int64_t i = 0; i < Q; i++)
        arow[i] = dsops_round_bf16(arow[i]);                      /* a = bf16(lin(x, wq_a)) */
    dsops_rmsnorm_row(arow, (int)Q, gcq, a->eps_cq, arow);
    uint16_t *cq = (uint16_t *)(scratch + L->cq) + t * Q;
    for (int64_t i = 0; i < Q; i++)
        cq[i] = dsops_bf16_round_bits(arow[i]);                       /* cq = bf16(RMSNorm(a)) */
    if (d->int8w) {
        for (int64_t i = 0; i < Q; i++)
            arow[i] = dsops_bf16_value(cq[i]);
        int8_t *q8 = (int8_t *)(scratch + L->qr8) + t * Q;
        float *qs = (float *)(scratch + L->qrs) + t;
        dsops_q8_group(arow, (int)Q, q8, qs);                     /* (qr, qr_scale) = Q8(f32(cq)) */
        memcpy(dsops_at2(&a->qr, t, 0), q8, (size_t)Q);
        *(float *)dsops_at1(&a->qr_scale, t) = *qs;
    } else {
        memcpy(dsops_at2(&a->qr, t, 0), cq, (size_t)Q * 2);       /* qr = cq */
    }
    float *kva = (float *)(scratch + L->kva) + t * (Dc + DR);
    for (int64_t i = 0; i < Dc + DR; i++)
        kva[i] = dsops_round_bf16(kva[i]);                        /* kva = bf16(lin(x, wkv_a)) */
    dsops_rmsnorm_row(kva, (int)Dc, gckv, a->eps_ckv, kva);
    for (int64_t i = 0; i < Dc; i++)
        ckv_out[i] = dsops_bf16_round_bits(kva[i]);
    uint16_t rope_in[DR];
    for (int e = 0; e < DR; e++)
        rope_in[e] = dsops_bf16_round_bits(kva[Dc + e]);              /* exact: already bf16 values */
    rope_bf16(a, t, rope_in, krope_out);
}

/* Step 8 for one token: the row at cache_index[t] in the chosen layout. */
static void store_token(const mlap_args *a, const mlap_dims *d, int64_t t, const uint16_t *ckv, const uint16_t *krope)
{
    int64_t r = *(const int64_t *)dsops_at1(&a->cache_index, t);
    if (r < 0)
        return;
    int64_t blk = r / d->BS, off = r % d->BS, Dc = d->Dc;
    if (a->kv_layout == DSOPS_KV_SPLIT_BF16) {
        memcpy(dsops_at3(&a->kv_cache, blk, off, 0), ckv, (size_t)Dc * 2);
        memcpy(dsops_at3(&a->kr_cache, blk, off, 0), krope, DR * 2);
        return;
    }
    if (a->kv_layout == DSOPS_KV_FLASHMLA_FP8) { /* FlashMLA's FP8 row of the bf16 latent and rope (§2.12) */
        uint16_t row[512 + DR];
        memcpy(row, ckv, 512 * 2);
        memcpy(row + 512, krope, DR * 2);
        dsops_fp8_v32_row(row, dsops_at3(&a->kv_packed, blk, off, 0));
        return;
    }
    int8_t q[512];
    float v[INT8_GROUP];
    for (int64_t g = 0; g < Dc / INT8_GROUP; g++) {
        float scale;
        for (int i = 0; i < INT8_GROUP; i++)
            v[i] = dsops_bf16_value(ckv[g * INT8_GROUP + i]);
        dsops_q8_group(v, INT8_GROUP, q, &scale);
        if (a->kv_layout == DSOPS_KV_SPLIT_INT8) {
            memcpy((int8_t *)dsops_at3(&a->kv_cache, blk, off, 0) + g * INT8_GROUP, q, INT8_GROUP);
            *(float *)dsops_at3(&a->kv_scale_cache, blk, off, g) = scale;
        } else {
            uint8_t *row = dsops_at3(&a->kv_packed, blk, off, 0); /* [656] */
            memcpy(row + g * INT8_GROUP, q, INT8_GROUP);
            memcpy(row + 640 + 4 * g, &scale, 4);
        }
    }
    if (a->kv_layout == DSOPS_KV_SPLIT_INT8)
        memcpy(dsops_at3(&a->kr_cache, blk, off, 0), krope, DR * 2);
    else
        memcpy((uint8_t *)dsops_at3(&a->kv_packed, blk, off, 0) + 512, krope, DR * 2);
}

/* Every check but the cache slots (those need scratch). */
static dsops_status check_all(const mlap_args *a, mlap_dims *d)
{
    DSOPS_TRY(check_shapes(a, d));
    DSOPS_TRY(check_params(a));
    DSOPS_TRY(check_aliasing(a));
    return check_prepared(a, d);
}

dsops_status dsops_mla_prolog_v32_validate(const mlap_args *a, void *slot_scratch)
{
    mlap_dims d;
    DSOPS_TRY(check_all(a, &d));
    return dsops_check_cache_slots(&a->cache_index, d.NB * d.BS, slot_scratch);
}

dsops_status dsops_mla_prolog_v32(dsops_context *ctx, const mlap_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    mlap_dims d;
    DSOPS_TRY(check_all(a, &d));
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    mlap_layout L = make_layout(&d);
    size_t extra = dsops_align64((size_t)(d.Q + d.Dc) * 4) + dsops_align64((size_t)d.T * (size_t)(d.Dc + DR) * 2);
    char *scratch = dsops_scratch(use, L.total + extra);
    dsops_status status = scratch ? dsops_check_cache_slots(&a->cache_index, d.NB * d.BS, scratch + L.slots) : DSOPS_ERR_NOMEM;
    const dsops_prepared *prep = a->prepared;
    dsops_prepared *own = NULL;
    if (status == DSOPS_OK && d.T > 0 && !prep) {
        status = prepare_maps(a, &d, use->threads, &own);
        prep = own;
    }
    if (status != DSOPS_OK || d.T == 0) {
        dsops_prepared_destroy(own);
        dsops_context_end(ctx, use);
        if (status == DSOPS_OK)
            dsops_clear_error();
        return status;
    }
    /* nothing is written above this line */
    int threads = use->threads;
    int64_t T = d.T, Q = d.Q, Dc = d.Dc, NG = d.N * d.G;
    float *gcq = (float *)(scratch + L.total), *gckv = gcq + Q;
    uint16_t *kv_rows = (uint16_t *)(scratch + L.total + dsops_align64((size_t)(Q + Dc) * 4)); /* [T][Dc+64] */
    dsops_widen_vector(&a->gamma_cq, (int)Q, gcq);
    dsops_widen_vector(&a->gamma_ckv, (int)Dc, gckv);

    /* 1, 7: a and kva, one batch of matmuls over x */
    dsops_linear_job j1[2] = {{prep->maps[0], a->x.data, a->x.stride[0], scratch + L.a, Q},
                              {prep->maps[1], a->x.data, a->x.stride[0], scratch + L.kva, Dc + DR}};
    status = dsops_linear_run(use, j1, 2, T, threads, use->isa);
    /* 2, 3 (quantisation), 7: norms per token */
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < T; t++) {
        uint16_t *kv = kv_rows + t * (Dc + DR);
        norms_of_token(a, &d, &L, scratch, t, gcq, gckv, kv, kv + Dc);
    }
    /* 3: qb */
    if (status == DSOPS_OK) {
        dsops_linear_job j3 = {prep->maps[2], d.int8w ? (void *)(scratch + L.qr8) : (void *)(scratch + L.cq), Q,
                               scratch + L.qbacc, NG};
        status = dsops_linear_run(use, &j3, 1, T, threads, use->isa);
    }
    uint16_t *qb = (uint16_t *)(scratch + L.qb);
    float *wscale = (float *)(scratch + L.wscale);
    if (d.int8w)
        for (int64_t n = 0; n < NG; n++)
            wscale[n] = *(const float *)dsops_at1(&a->wq_b_scale, n);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < T; t++) {
        uint16_t *row = qb + t * NG;
        if (d.int8w) {
            const int32_t *acc = (const int32_t *)(scratch + L.qbacc) + t * NG;
            float qs = ((const float *)(scratch + L.qrs))[t];
            for (int64_t n = 0; n < NG; n++)
                row[n] = dsops_bf16_round_bits(((float)acc[n] * qs) * wscale[n]);
        } else {
            const float *acc = (const float *)(scratch + L.qbacc) + t * NG;
            for (int64_t n = 0; n < NG; n++)
                row[n] = dsops_bf16_round_bits(acc[n]);
        }
        /* 6: q_rope */
        for (int64_t h = 0; h < d.N; h++)
            rope_bf16(a, t, row + h * d.G + d.Dqn, (uint16_t *)dsops_at3(&a->q_rope, t, h, 0));
    }
    /* 5: absorbed q_nope, a group of heads at a time */
    dsops_linear_job *jobs = malloc(sizeof *jobs * (size_t)L.head_group);
    if (!jobs && status == DSOPS_OK)
        status = dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %lld matmul jobs", (long long)L.head_group);
    for (int64_t h0 = 0; status == DSOPS_OK && h0 < d.N; h0 += L.head_group) {
        int64_t hn = d.N - h0 < L.head_group ? d.N - h0 : L.head_group;
        float *qn = (float *)(scratch + L.qn); /* [hn][T][Dc] */
        for (int64_t h = 0; h < hn; h++)
            jobs[h] = (dsops_linear_job){prep->maps[3 + h0 + h], qb + (h0 + h) * d.G, NG, qn + h * T * Dc, Dc};
        status = dsops_linear_run(use, jobs, (int)hn, T, threads, use->isa);
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t th = 0; th < hn * T; th++) {
            int64_t h = th / T, t = th % T;
            uint16_t *dst = dsops_at3(&a->q_nope, t, h0 + h, 0);
            const float *src = qn + (h * T + t) * Dc;
            for (int64_t c = 0; c < Dc; c++)
                dst[c] = dsops_bf16_round_bits(src[c]);
        }
    }
    free(jobs);
    /* 8: cache rows (slots were checked distinct, so tokens write disjoint rows) */
    if (status == DSOPS_OK) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t t = 0; t < T; t++) {
            const uint16_t *kv = kv_rows + t * (Dc + DR);
            store_token(a, &d, t, kv, kv + Dc);
        }
    }
    dsops_prepared_destroy(own);
    dsops_context_end(ctx, use);
    if (status == DSOPS_OK)
        dsops_clear_error();
    return status;
}
