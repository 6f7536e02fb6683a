/* mla_prolog_v4 (spec §3.3): validate -> oneDNN matmuls for wq_a / wkv, then wq_b, with the norms, the
 * per-head query norm, RoPE on the last 64 dims and the Q8 of qr as per-token epilogues. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "linear.h"
#include "primitives.h"

typedef dsops_mla_prolog_v4_args mla4_args;

#define DR 64 /* rotary dims (fixed, spec §1.2) */
#define MAP_WQ_A 0
#define MAP_WKV 1
#define MAP_WQ_B 2
#define MAP_COUNT 3

dsops_status dsops_mla_prolog_v4_init(mla4_args *a, dsops_preset preset)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    a->eps_cq = a->eps_ckv = a->eps_qh = 1e-6f;
    a->rope_mode = DSOPS_ROPE_INTERLEAVED;
    a->rope_inverse = 0;
    if (preset != DSOPS_PRESET_V4_FLASH && preset != DSOPS_PRESET_V4_PRO)
        return dsops_fail(DSOPS_ERR_PARAM, "preset = %d: mla_prolog_v4 exists only for the V4 presets", (int)preset);
    dsops_clear_error();
    return DSOPS_OK;
}

typedef struct mla4_dims {
    int64_t T, H, Q, N, D;
    bool int8w; /* int8 wq_b */
} mla4_dims;

/* ---- validation ------------------------------------------------------------------------------ */

static dsops_status check_weights(const mla4_args *a, mla4_dims *d)
{
    const unsigned bf16 = DSOPS_DT(DSOPS_BF16), norm = DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32);
    DSOPS_TRY(dsops_check_tensor(&a->wq_a, "wq_a", 2, bf16, true));
    d->Q = a->wq_a.shape[0];
    d->H = a->wq_a.shape[1];
    DSOPS_TRY(dsops_check_tensor(&a->wkv, "wkv", 2, bf16, true));
    d->D = a->wkv.shape[0];
    if (d->Q < 1 || d->H < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "wq_a is [%lld, %lld], expected both extents >= 1", (long long)d->Q,
                          (long long)d->H);
    if (d->D <= DR)
        return dsops_fail(DSOPS_ERR_SHAPE, "wkv.shape[0] = %lld (D), expected > 64", (long long)d->D);
    DSOPS_TRY(dsops_check_dim(&a->wkv, "wkv", 1, d->H, "H of wq_a"));
    if (!a->wq_b.data)
        return dsops_fail(DSOPS_ERR_NULL, "wq_b is NULL (required)");
    d->int8w = a->wq_b.dtype == DSOPS_INT8;
    DSOPS_TRY(dsops_check_tensor(&a->wq_b, "wq_b", 2, bf16 | DSOPS_DT(DSOPS_INT8), true));
    int64_t rows = a->wq_b.shape[0];
    if (rows < d->D || rows % d->D)
        return dsops_fail(DSOPS_ERR_SHAPE, "wq_b.shape[0] = %lld, expected N * D with N >= 1 (D = %lld from wkv)",
                          (long long)rows, (long long)d->D);
    d->N = rows / d->D;
    DSOPS_TRY(dsops_check_dim(&a->wq_b, "wq_b", 1, d->Q, "Q of wq_a"));
    if (d->int8w) {
        if (d->Q > 131072)
            return dsops_fail(DSOPS_ERR_SHAPE, "wq_a.shape[0] = %lld (Q), expected <= 131072 for int8 wq_b", (long long)d->Q);
        DSOPS_TRY(dsops_check_tensor(&a->wq_b_scale, "wq_b_scale", 1, DSOPS_DT(DSOPS_FP32), false));
        DSOPS_TRY(dsops_check_dim(&a->wq_b_scale, "wq_b_scale", 0, rows, "rows of wq_b"));
    }
    DSOPS_TRY(dsops_check_tensor(&a->gamma_cq, "gamma_cq", 1, norm, false));
    DSOPS_TRY(dsops_check_dim(&a->gamma_cq, "gamma_cq", 0, d->Q, "Q of wq_a"));
    DSOPS_TRY(dsops_check_tensor(&a->gamma_ckv, "gamma_ckv", 1, norm, false));
    return dsops_check_dim(&a->gamma_ckv, "gamma_ckv", 0, d->D, "D of wkv");
}

static dsops_status check_shapes(const mla4_args *a, mla4_dims *d)
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
    DSOPS_TRY(dsops_check_tensor(&a->q, "q", 3, bf16, true));
    DSOPS_TRY(dsops_check_dim(&a->q, "q", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->q, "q", 1, d->N, "N = rows of wq_b / D"));
    DSOPS_TRY(dsops_check_dim(&a->q, "q", 2, d->D, "D of wkv"));
    DSOPS_TRY(dsops_check_tensor(&a->kv, "kv", 2, bf16, true));
    DSOPS_TRY(dsops_check_dim(&a->kv, "kv", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->kv, "kv", 1, d->D, "D of wkv"));
    DSOPS_TRY(dsops_check_tensor(&a->qr, "qr", 2, DSOPS_DT(d->int8w ? DSOPS_INT8 : DSOPS_BF16), true));
    DSOPS_TRY(dsops_check_dim(&a->qr, "qr", 0, d->T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->qr, "qr", 1, d->Q, "Q of wq_a"));
    if (d->int8w) {
        DSOPS_TRY(dsops_check_tensor(&a->qr_scale, "qr_scale", 1, DSOPS_DT(DSOPS_FP32), false));
        DSOPS_TRY(dsops_check_dim(&a->qr_scale, "qr_scale", 0, d->T, "T of x"));
    }
    return DSOPS_OK;
}

static dsops_status check_params(const mla4_args *a)
{
    const struct {
        const char *name;
        float v;
    } eps[] = {{"eps_cq", a->eps_cq}, {"eps_ckv", a->eps_ckv}, {"eps_qh", a->eps_qh}};
    for (int i = 0; i < 3; i++)
        if (!isfinite(eps[i].v) || eps[i].v < 0)
            return dsops_fail(DSOPS_ERR_PARAM, "%s = %g, expected finite and >= 0", eps[i].name, (double)eps[i].v);
    if ((int)a->rope_mode < 0 || (int)a->rope_mode > DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT)
        return dsops_fail(DSOPS_ERR_PARAM, "rope_mode = %d is not a dsops_rope_mode value", (int)a->rope_mode);
    return DSOPS_OK;
}

static dsops_status check_aliasing(const mla4_args *a)
{
    const dsops_named_tensor outs[] = {{&a->q, "q"}, {&a->kv, "kv"}, {&a->qr, "qr"}, {&a->qr_scale, "qr_scale"}};
    const dsops_named_tensor ins[] = {
        {&a->x, "x"}, {&a->wq_a, "wq_a"}, {&a->gamma_cq, "gamma_cq"}, {&a->wq_b, "wq_b"},
        {&a->wq_b_scale, "wq_b_scale"}, {&a->wkv, "wkv"}, {&a->gamma_ckv, "gamma_ckv"},
        {&a->rope_cos, "rope_cos"}, {&a->rope_sin, "rope_sin"}};
    return dsops_check_outputs_apart(outs, sizeof outs / sizeof outs[0], ins, sizeof ins / sizeof ins[0]);
}

/* ---- prepared weights ------------------------------------------------------------------------ */

static void weight_sources(const mla4_args *a, const mla4_dims *d, dsops_linear_source src[MAP_COUNT])
{
    src[MAP_WQ_A] = (dsops_linear_source){"wq_a", a->wq_a.data, DSOPS_BF16, d->Q, d->H, a->wq_a.stride[0], 1};
    src[MAP_WKV] = (dsops_linear_source){"wkv", a->wkv.data, DSOPS_BF16, d->D, d->H, a->wkv.stride[0], 1};
    src[MAP_WQ_B] = (dsops_linear_source){"wq_b", a->wq_b.data, a->wq_b.dtype, d->N * d->D, d->Q, a->wq_b.stride[0], 1};
}

dsops_status dsops_mla_prolog_v4_prepare(dsops_context *ctx, const mla4_args *a, dsops_prepared **out)
{
    if (!a || !out)
        return dsops_fail(DSOPS_ERR_NULL, "%s is NULL", a ? "prepared" : "args");
    *out = NULL;
    mla4_dims d = {0};
    DSOPS_TRY(check_weights(a, &d));
    dsops_linear_source src[MAP_COUNT];
    weight_sources(a, &d, src);
    int threads = 1;
    DSOPS_TRY(dsops_context_thread_count(ctx, &threads));
    DSOPS_TRY(dsops_prepared_make("mla_prolog_v4", src, MAP_COUNT, threads, out));
    dsops_clear_error();
    return DSOPS_OK;
}

/* ---- execution ------------------------------------------------------------------------------- */

/* Scratch areas of one call (byte offsets). */
typedef struct mla4_layout {
    size_t a, ka, qr, qrs, qbacc, gamma, total;
} mla4_layout;

static mla4_layout make_layout(const mla4_dims *d)
{
    mla4_layout L;
    size_t T = (size_t)d->T, off = 0;
    L.a = off;     off += dsops_align64(T * (size_t)d->Q * 4);              /* [T, Q] fp32 */
    L.ka = off;    off += dsops_align64(T * (size_t)d->D * 4);              /* [T, D] fp32 */
    L.qr = off;    off += dsops_align64(T * (size_t)d->Q * 2);              /* [T, Q] bf16 or int8: wq_b input */
    L.qrs = off;   off += dsops_align64(T * 4);                             /* [T] fp32 */
    L.qbacc = off; off += dsops_align64(T * (size_t)(d->N * d->D) * 4);     /* [T, N*D] fp32 / int32 */
    L.gamma = off; off += dsops_align64((size_t)(d->Q + d->D + d->N * d->D) * 4); /* gammas, wq_b_scale */
    L.total = off;
    return L;
}

/* dst[0:D] = [v[0:D-64] ; rot(v[D-64:D])], all bf16 (v holds bf16 values, exact in fp32). */
static void rope_tail(const mla4_args *a, int64_t t, int64_t D, const float *v, uint16_t *dst)
{
    for (int64_t i = 0; i < D; i++)
        dst[i] = dsops_bf16_round_bits(v[i]);
    dsops_rope_bf16_slice(dst + D - DR, &a->rope_cos, &a->rope_sin, t, a->rope_mode, a->rope_inverse != 0,
                          dst + D - DR);
}

/* Steps 1-2 of one token (a -> qr) and 6-8 (ka -> kv). */
static void token_norms(const mla4_args *a, const mla4_dims *d, const mla4_layout *L, char *scratch, int64_t t)
{
    int64_t Q = d->Q, D = d->D;
    const float *gcq = (const float *)(scratch + L->gamma), *gckv = gcq + Q;
    float *arow = (float *)(scratch + L->a) + t * Q;
    if (d->int8w) {
        dsops_rmsnorm_row(arow, (int)Q, gcq, a->eps_cq, arow);          /* cq, fp32 */
        int8_t *q8 = (int8_t *)(scratch + L->qr) + t * Q;
        float *qs = (float *)(scratch + L->qrs) + t;
        dsops_q8_group(arow, (int)Q, q8, qs);
        memcpy(dsops_at2(&a->qr, t, 0), q8, (size_t)Q);
        *(float *)dsops_at1(&a->qr_scale, t) = *qs;
    } else {
        for (int64_t i = 0; i < Q; i++)
            arow[i] = dsops_round_bf16(arow[i]);                         /* a = bf16(lin(x, wq_a)) */
        dsops_rmsnorm_row(arow, (int)Q, gcq, a->eps_cq, arow);
        uint16_t *qr = (uint16_t *)(scratch + L->qr) + t * Q;
        for (int64_t i = 0; i < Q; i++)
            qr[i] = dsops_bf16_round_bits(arow[i]);
        memcpy(dsops_at2(&a->qr, t, 0), qr, (size_t)Q * 2);
    }
    float *ka = (float *)(scratch + L->ka) + t * D;
    if (!d->int8w)
        for (int64_t i = 0; i < D; i++)
            ka[i] = dsops_round_bf16(ka[i]);
    dsops_rmsnorm_row(ka, (int)D, gckv, a->eps_ckv, ka);
    for (int64_t i = 0; i < D; i++)
        ka[i] = dsops_round_bf16(ka[i]);                                 /* kn */
    rope_tail(a, t, D, ka, (uint16_t *)dsops_at2(&a->kv, t, 0));
}

/* Steps 3 (the scaling of the int8 variant), 4, 5 for head h of token t. */
static void head_query(const mla4_args *a, const mla4_dims *d, const mla4_layout *L, char *scratch, int64_t t,
                       int64_t h, float *v)
{
    int64_t D = d->D, ND = d->N * d->D;
    if (d->int8w) {
        const int32_t *acc = (const int32_t *)(scratch + L->qbacc) + t * ND + h * D;
        const float *ws = (const float *)(scratch + L->gamma) + d->Q + D + h * D;
        float qs = ((const float *)(scratch + L->qrs))[t];
        for (int64_t i = 0; i < D; i++)
            v[i] = ((float)acc[i] * qs) * ws[i];
    } else {
        const float *acc = (const float *)(scratch + L->qbacc) + t * ND + h * D;
        for (int64_t i = 0; i < D; i++)
            v[i] = dsops_round_bf16(acc[i]);
    }
    dsops_rmsnorm_row(v, (int)D, NULL, a->eps_qh, v);
    for (int64_t i = 0; i < D; i++)
        v[i] = dsops_round_bf16(v[i]);
    rope_tail(a, t, D, v, (uint16_t *)dsops_at3(&a->q, t, h, 0));
}

static dsops_status check_all(const mla4_args *a, mla4_dims *d)
{
    DSOPS_TRY(check_shapes(a, d));
    DSOPS_TRY(check_params(a));
    DSOPS_TRY(check_aliasing(a));
    dsops_linear_source src[MAP_COUNT];
    weight_sources(a, d, src);
    return dsops_prepared_check(a->prepared, "mla_prolog_v4", src, MAP_COUNT);
}

dsops_status dsops_mla_prolog_v4(dsops_context *ctx, const mla4_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    mla4_dims d = {0};
    DSOPS_TRY(check_all(a, &d));
    if (d.T == 0) {
        dsops_clear_error();
        return DSOPS_OK;
    }
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    mla4_layout L = make_layout(&d);
    int threads = use->threads;
    size_t per_thread = dsops_align64((size_t)d.D * 4);
    char *scratch = dsops_scratch(use, L.total + per_thread * (size_t)threads);
    dsops_status status = scratch ? DSOPS_OK : DSOPS_ERR_NOMEM;
    const dsops_prepared *prep = NULL;
    dsops_prepared *own = NULL;
    dsops_linear_source src[MAP_COUNT];
    weight_sources(a, &d, src);
    if (status == DSOPS_OK)
        status = dsops_prepared_for_call(a->prepared, "mla_prolog_v4", src, MAP_COUNT, threads, &prep, &own);
    if (status != DSOPS_OK) {
        dsops_context_end(ctx, use);
        return status;
    }
    /* nothing is written above this line */
    int64_t T = d.T, Q = d.Q, D = d.D, ND = d.N * d.D;
    float *gamma = (float *)(scratch + L.gamma);
    dsops_widen_vector(&a->gamma_cq, (int)Q, gamma);
    dsops_widen_vector(&a->gamma_ckv, (int)D, gamma + Q);
    if (d.int8w)
        for (int64_t n = 0; n < ND; n++)
            gamma[Q + D + n] = *(const float *)dsops_at1(&a->wq_b_scale, n);

    /* 1, 6: a and ka in one batch of matmuls over x */
    dsops_linear_job j1[2] = {{prep->maps[MAP_WQ_A], a->x.data, a->x.stride[0], scratch + L.a, Q},
                              {prep->maps[MAP_WKV], a->x.data, a->x.stride[0], scratch + L.ka, D}};
    status = dsops_linear_run(use, j1, 2, T, threads, use->isa);
    if (status == DSOPS_OK) {
        /* 2, 7, 8 */
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t t = 0; t < T; t++)
            token_norms(a, &d, &L, scratch, t);
        /* 3: qb */
        dsops_linear_job j3 = {prep->maps[MAP_WQ_B], scratch + L.qr, Q, scratch + L.qbacc, ND};
        status = dsops_linear_run(use, &j3, 1, T, threads, use->isa);
    }
    if (status == DSOPS_OK) {
        /* 4, 5: one (token, head) pair per iteration */
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t th = 0; th < T * d.N; th++) {
            float *v = (float *)(scratch + L.total + per_thread * (size_t)dsops_thread_num());
            head_query(a, &d, &L, scratch, th / d.N, th % d.N, v);
        }
    }
    dsops_prepared_destroy(own);
    dsops_context_end(ctx, use);
    if (status == DSOPS_OK)
        dsops_clear_error();
    return status;
}
