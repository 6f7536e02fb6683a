/* indexer_prolog_v4 (spec §3.5): validate -> oneDNN matmuls (qr -> idx_wq_b int8, x -> weights_proj),
 * per-head scaling and RoPE on the last 64 dims, the Hadamard rotation of every head as one more matmul,
 * then the per-head Q8 and the fp16 weights. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "linear.h"
#include "primitives.h"

typedef dsops_indexer_prolog_v4_args idx4_args;

#define DR 64 /* rotary dims (fixed, spec §1.2) */
/* Prepared maps. The Hadamard matrix Hm is applied as u Hm, i.e. W[n][k] = Hm[k][n]. */
enum { MAP_WQ_B, MAP_WPROJ, MAP_HAD, MAP_COUNT };

dsops_status dsops_indexer_prolog_v4_init(idx4_args *a, dsops_preset preset)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    a->weights_scale = (float)(1.0 / sqrt(64.0 * 128.0));
    a->rope_mode = DSOPS_ROPE_INTERLEAVED;
    a->rope_inverse = 0;
    if (preset != DSOPS_PRESET_V4_FLASH && preset != DSOPS_PRESET_V4_PRO)
        return dsops_fail(DSOPS_ERR_PARAM, "preset = %d: indexer_prolog_v4 exists only for the V4 presets", (int)preset);
    dsops_clear_error();
    return DSOPS_OK;
}

typedef struct idx4_dims {
    int64_t T, H, Q, NI, DI;
} idx4_dims;

/* ---- validation ------------------------------------------------------------------------------ */

static dsops_status check_weights(const idx4_args *a, idx4_dims *d)
{
    const unsigned bf16 = DSOPS_DT(DSOPS_BF16);
    DSOPS_TRY(dsops_check_tensor(&a->hadamard, "hadamard", 2, bf16 | DSOPS_DT(DSOPS_FP32), true));
    d->DI = a->hadamard.shape[0];
    if (d->DI < DR)
        return dsops_fail(DSOPS_ERR_SHAPE, "hadamard.shape[0] = %lld (DI), expected >= 64", (long long)d->DI);
    DSOPS_TRY(dsops_check_dim(&a->hadamard, "hadamard", 1, d->DI, "DI (square matrix)"));
    DSOPS_TRY(dsops_check_tensor(&a->weights_proj, "weights_proj", 2, bf16, true));
    d->NI = a->weights_proj.shape[0];
    d->H = a->weights_proj.shape[1];
    if (d->NI < 1 || d->H < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "weights_proj is [%lld, %lld], expected both extents >= 1",
                          (long long)d->NI, (long long)d->H);
    DSOPS_TRY(dsops_check_tensor(&a->idx_wq_b, "idx_wq_b", 2, DSOPS_DT(DSOPS_INT8), true));
    DSOPS_TRY(dsops_check_dim(&a->idx_wq_b, "idx_wq_b", 0, d->NI * d->DI, "NI * DI (weights_proj, hadamard)"));
    d->Q = a->idx_wq_b.shape[1];
    if (d->Q < 1 || d->Q > 131072)
        return dsops_fail(DSOPS_ERR_SHAPE, "idx_wq_b.shape[1] = %lld (Q), expected 1 ... 131072", (long long)d->Q);
    DSOPS_TRY(dsops_check_tensor(&a->idx_wq_b_scale, "idx_wq_b_scale", 1, DSOPS_DT(DSOPS_FP32), false));
    return dsops_check_dim(&a->idx_wq_b_scale, "idx_wq_b_scale", 0, d->NI * d->DI, "rows of idx_wq_b");
}

static dsops_status check_shapes(const idx4_args *a, idx4_dims *d)
{
    const unsigned table = DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32), fp16 = DSOPS_DT(DSOPS_FP16);
    DSOPS_TRY(check_weights(a, d));
    DSOPS_TRY(dsops_check_tensor(&a->qr, "qr", 2, DSOPS_DT(DSOPS_INT8), true));
    d->T = a->qr.shape[0];
    DSOPS_TRY(dsops_check_dim(&a->qr, "qr", 1, d->Q, "Q of idx_wq_b"));
    DSOPS_TRY(dsops_check_tensor(&a->qr_scale, "qr_scale", 1, DSOPS_DT(DSOPS_FP32), false));
    DSOPS_TRY(dsops_check_dim(&a->qr_scale, "qr_scale", 0, d->T, "T of qr"));
    DSOPS_TRY(dsops_check_tensor(&a->x, "x", 2, DSOPS_DT(DSOPS_BF16), true));
    DSOPS_TRY(dsops_check_dim(&a->x, "x", 0, d->T, "T of qr"));
    DSOPS_TRY(dsops_check_dim(&a->x, "x", 1, d->H, "H of weights_proj"));
    DSOPS_TRY(dsops_check_tensor(&a->rope_cos, "rope_cos", 2, table, true));
    DSOPS_TRY(dsops_check_dim(&a->rope_cos, "rope_cos", 0, d->T, "T of qr"));
    DSOPS_TRY(dsops_check_dim(&a->rope_cos, "rope_cos", 1, DR, "rotary width"));
    DSOPS_TRY(dsops_check_tensor(&a->rope_sin, "rope_sin", 2, table, true));
    DSOPS_TRY(dsops_check_dim(&a->rope_sin, "rope_sin", 0, d->T, "T of qr"));
    DSOPS_TRY(dsops_check_dim(&a->rope_sin, "rope_sin", 1, DR, "rotary width"));
    DSOPS_TRY(dsops_check_tensor(&a->q_idx, "q_idx", 3, DSOPS_DT(DSOPS_INT8), true));
    DSOPS_TRY(dsops_check_dim(&a->q_idx, "q_idx", 0, d->T, "T of qr"));
    DSOPS_TRY(dsops_check_dim(&a->q_idx, "q_idx", 1, d->NI, "NI of weights_proj"));
    DSOPS_TRY(dsops_check_dim(&a->q_idx, "q_idx", 2, d->DI, "DI of hadamard"));
    DSOPS_TRY(dsops_check_tensor(&a->q_idx_scale, "q_idx_scale", 2, fp16, false));
    DSOPS_TRY(dsops_check_dim(&a->q_idx_scale, "q_idx_scale", 0, d->T, "T of qr"));
    DSOPS_TRY(dsops_check_dim(&a->q_idx_scale, "q_idx_scale", 1, d->NI, "NI of weights_proj"));
    DSOPS_TRY(dsops_check_tensor(&a->weights, "weights", 2, fp16, false));
    DSOPS_TRY(dsops_check_dim(&a->weights, "weights", 0, d->T, "T of qr"));
    return dsops_check_dim(&a->weights, "weights", 1, d->NI, "NI of weights_proj");
}

static dsops_status check_params(const idx4_args *a)
{
    if (!isfinite(a->weights_scale))
        return dsops_fail(DSOPS_ERR_PARAM, "weights_scale = %g, expected finite", (double)a->weights_scale);
    if ((int)a->rope_mode < 0 || (int)a->rope_mode > DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT)
        return dsops_fail(DSOPS_ERR_PARAM, "rope_mode = %d is not a dsops_rope_mode value", (int)a->rope_mode);
    return DSOPS_OK;
}

static dsops_status check_aliasing(const idx4_args *a)
{
    const dsops_named_tensor outs[] = {{&a->q_idx, "q_idx"}, {&a->q_idx_scale, "q_idx_scale"}, {&a->weights, "weights"}};
    const dsops_named_tensor ins[] = {
        {&a->qr, "qr"}, {&a->qr_scale, "qr_scale"}, {&a->x, "x"}, {&a->idx_wq_b, "idx_wq_b"},
        {&a->idx_wq_b_scale, "idx_wq_b_scale"}, {&a->weights_proj, "weights_proj"}, {&a->rope_cos, "rope_cos"},
        {&a->rope_sin, "rope_sin"}, {&a->hadamard, "hadamard"}};
    return dsops_check_outputs_apart(outs, sizeof outs / sizeof outs[0], ins, sizeof ins / sizeof ins[0]);
}

/* ---- prepared weights ------------------------------------------------------------------------ */

static void weight_sources(const idx4_args *a, const idx4_dims *d, dsops_linear_source src[MAP_COUNT])
{
    src[MAP_WQ_B] = (dsops_linear_source){"idx_wq_b", a->idx_wq_b.data, DSOPS_INT8, d->NI * d->DI, d->Q,
                                          a->idx_wq_b.stride[0], 1};
    src[MAP_WPROJ] = (dsops_linear_source){"weights_proj", a->weights_proj.data, DSOPS_BF16, d->NI, d->H,
                                           a->weights_proj.stride[0], 1};
    src[MAP_HAD] = (dsops_linear_source){"hadamard", a->hadamard.data, a->hadamard.dtype, d->DI, d->DI, 1,
                                         a->hadamard.stride[0]};
}

dsops_status dsops_indexer_prolog_v4_prepare(dsops_context *ctx, const idx4_args *a, dsops_prepared **out)
{
    if (!a || !out)
        return dsops_fail(DSOPS_ERR_NULL, "%s is NULL", a ? "prepared" : "args");
    *out = NULL;
    idx4_dims d = {0};
    DSOPS_TRY(check_weights(a, &d));
    dsops_linear_source src[MAP_COUNT];
    weight_sources(a, &d, src);
    int threads = 1;
    DSOPS_TRY(dsops_context_thread_count(ctx, &threads));
    DSOPS_TRY(dsops_prepared_make("indexer_prolog_v4", src, MAP_COUNT, threads, out));
    dsops_clear_error();
    return DSOPS_OK;
}

/* ---- execution ------------------------------------------------------------------------------- */

typedef struct idx4_layout {
    size_t qacc, w, u, hq, wscale, total;
} idx4_layout;

static idx4_layout make_layout(const idx4_dims *d, size_t u_elem)
{
    idx4_layout L;
    size_t T = (size_t)d->T, NI = (size_t)d->NI, DI = (size_t)d->DI, off = 0;
    L.qacc = off;   off += dsops_align64(T * NI * DI * 4);     /* [T, NI*DI] int32 */
    L.w = off;      off += dsops_align64(T * NI * 4);          /* [T, NI] fp32 */
    L.u = off;      off += dsops_align64(T * NI * DI * u_elem); /* [T*NI, DI] rotated heads, Hadamard's dtype */
    L.hq = off;     off += dsops_align64(T * NI * DI * 4);     /* [T*NI, DI] fp32 after the Hadamard */
    L.wscale = off; off += dsops_align64(NI * DI * 4);         /* [NI*DI] idx_wq_b_scale, dense */
    L.total = off;
    return L;
}

/* Steps 1-3 for token t: the rotated head rows u (in the Hadamard matrix's dtype), and step 6-7. */
static void token_heads(const idx4_args *a, const idx4_dims *d, const idx4_layout *L, char *scratch, int64_t t,
                        uint16_t *row)
{
    int64_t NI = d->NI, DI = d->DI;
    bool f32u = a->hadamard.dtype == DSOPS_FP32;
    const float *wscale = (const float *)(scratch + L->wscale);
    float qs = *(const float *)dsops_at1(&a->qr_scale, t);
    for (int64_t h = 0; h < NI; h++) {
        int64_t base = (t * NI + h) * DI;
        const int32_t *acc = (const int32_t *)(scratch + L->qacc) + base;
        for (int64_t e = 0; e < DI; e++)
            row[e] = dsops_bf16_round_bits(((float)acc[e] * qs) * wscale[h * DI + e]);
        dsops_rope_bf16_slice(row + DI - DR, &a->rope_cos, &a->rope_sin, t, a->rope_mode, a->rope_inverse != 0,
                              row + DI - DR);
        if (f32u)
            dsops_bf16_to_fp32(row, (float *)(scratch + L->u) + base, (size_t)DI);
        else
            memcpy((uint16_t *)(scratch + L->u) + base, row, (size_t)DI * 2);
    }
    const float *w = (const float *)(scratch + L->w) + t * NI;
    for (int64_t h = 0; h < NI; h++)
        *(uint16_t *)dsops_at2(&a->weights, t, h) = dsops_fp16_round_bits(dsops_round_bf16(w[h]) * a->weights_scale);
}

/* Steps 4-5 for token t: Q8 of the bf16-rounded Hadamard product of every head. */
static void token_quant(const idx4_args *a, const idx4_dims *d, const idx4_layout *L, const char *scratch,
                        int64_t t, float *f)
{
    int64_t NI = d->NI, DI = d->DI;
    for (int64_t h = 0; h < NI; h++) {
        const float *hq = (const float *)(scratch + L->hq) + (t * NI + h) * DI;
        float s;
        for (int64_t e = 0; e < DI; e++)
            f[e] = dsops_round_bf16(hq[e]);
        dsops_q8_group(f, (int)DI, (int8_t *)dsops_at3(&a->q_idx, t, h, 0), &s);
        *(uint16_t *)dsops_at2(&a->q_idx_scale, t, h) = dsops_fp16_round_bits(s);
    }
}

static dsops_status check_all(const idx4_args *a, idx4_dims *d)
{
    DSOPS_TRY(check_shapes(a, d));
    DSOPS_TRY(check_params(a));
    DSOPS_TRY(check_aliasing(a));
    dsops_linear_source src[MAP_COUNT];
    weight_sources(a, d, src);
    return dsops_prepared_check(a->prepared, "indexer_prolog_v4", src, MAP_COUNT);
}

dsops_status dsops_indexer_prolog_v4(dsops_context *ctx, const idx4_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    idx4_dims d = {0};
    DSOPS_TRY(check_all(a, &d));
    if (d.T == 0) {
        dsops_clear_error();
        return DSOPS_OK;
    }
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    idx4_layout L = make_layout(&d, dsops_dtype_size(a->hadamard.dtype));
    int threads = use->threads;
    size_t per_thread = dsops_align64((size_t)d.DI * 4);
    char *scratch = dsops_scratch(use, L.total + per_thread * (size_t)threads);
    dsops_status status = scratch ? DSOPS_OK : DSOPS_ERR_NOMEM;
    const dsops_prepared *prep = NULL;
    dsops_prepared *own = NULL;
    dsops_linear_source src[MAP_COUNT];
    weight_sources(a, &d, src);
    if (status == DSOPS_OK)
        status = dsops_prepared_for_call(a->prepared, "indexer_prolog_v4", src, MAP_COUNT, threads, &prep, &own);
    if (status != DSOPS_OK) {
        dsops_context_end(ctx, use);
        return status;
    }
    /* nothing is written above this line */
    int64_t T = d.T, NI = d.NI, DI = d.DI;
    float *wscale = (float *)(scratch + L.wscale);
    for (int64_t n = 0; n < NI * DI; n++)
        wscale[n] = *(const float *)dsops_at1(&a->idx_wq_b_scale, n);
    dsops_linear_job j1[2] = {{prep->maps[MAP_WQ_B], a->qr.data, a->qr.stride[0], scratch + L.qacc, NI * DI},
                              {prep->maps[MAP_WPROJ], a->x.data, a->x.stride[0], scratch + L.w, NI}};
    status = dsops_linear_run(use, j1, 2, T, threads, use->isa);
    if (status == DSOPS_OK) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t t = 0; t < T; t++)
            token_heads(a, &d, &L, scratch, t, (uint16_t *)(scratch + L.total + per_thread * (size_t)dsops_thread_num()));
        dsops_linear_job jh = {prep->maps[MAP_HAD], scratch + L.u, DI, scratch + L.hq, DI};
        status = dsops_linear_run(use, &jh, 1, T * NI, threads, use->isa);
    }
    if (status == DSOPS_OK) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t t = 0; t < T; t++)
            token_quant(a, &d, &L, scratch, t, (float *)(scratch + L.total + per_thread * (size_t)dsops_thread_num()));
    }
    dsops_prepared_destroy(own);
    dsops_context_end(ctx, use);
    if (status == DSOPS_OK)
        dsops_clear_error();
    return status;
}
