/* hc_pre and hc_post (spec §3.1, §3.2): DeepSeek-V4 hyper-connections, on the tier's hc kernels
 * (src/kernels/hc/; the scalar tier is the portable implementation). hc_pre: the M-mix reduction runs
 * over groups of tokens on the bf16 streams in place with hc_fn packed for the tier (once per call, or
 * once in a prepared object); RMS, gates, Sinkhorn and the weighted sum are per-token epilogues while the
 * group's streams are still in cache. hc_post: one kernel call per token. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "dispatch.h"
#include "linear.h"

/* Tokens per mix call, at most. A token's sums do not depend on its group, so the group size only moves
 * work between threads. */
#define HC_TOKEN_GROUP 32
/* Output elements of hc_post per thread, at least (decode-size calls run on fewer threads). */
#define HC_POST_MIN_WORK (1 << 18)

dsops_status dsops_hc_pre_init(dsops_hc_pre_args *a, dsops_preset preset)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    a->sinkhorn_iters = 20;
    a->norm_eps = 1e-6f;
    a->hc_eps = 1e-6f;
    if (preset != DSOPS_PRESET_V4_FLASH && preset != DSOPS_PRESET_V4_PRO)
        return dsops_fail(DSOPS_ERR_PARAM, "preset = %d: hc_pre exists only for the V4 presets", (int)preset);
    dsops_clear_error();
    return DSOPS_OK;
}

static dsops_status check_eps(const char *name, float v)
{
    if (!isfinite(v) || v < 0)
        return dsops_fail(DSOPS_ERR_PARAM, "%s = %g, expected finite and >= 0", name, (double)v);
    return DSOPS_OK;
}

/* The prepared object of hc_pre has no linear maps: `packed` starts with this header (one cache line),
 * then hc_fn packed by the `pack` of the tier it was made for. A call on a tier that packs with another
 * function packs its own copy, so a prepared object serves every tier. */
typedef struct hc_packed_header {
    const void *w;            /* the hc_fn it was made from (identity, as dsops_prepared_check) */
    int64_t M, W, ldw;
    void (*pack)(const float *w, size_t ldw, int M, int HC, int64_t H, float *wp);
} hc_packed_header;
#define HC_HEADER_BYTES 64
_Static_assert(sizeof(hc_packed_header) <= HC_HEADER_BYTES, "the header fits one cache line");

static const char HC_PRE_OP[] = "hc_pre";

dsops_status dsops_hc_pre_prepare(dsops_context *ctx, const dsops_hc_pre_args *a, dsops_prepared **out)
{
    if (!a || !out)
        return dsops_fail(DSOPS_ERR_NULL, "%s is NULL", a ? "prepared" : "args");
    *out = NULL;
    DSOPS_TRY(dsops_check_tensor(&a->hc_fn, "hc_fn", 2, DSOPS_DT(DSOPS_FP32), true));
    int64_t M = a->hc_fn.shape[0], W = a->hc_fn.shape[1], HC = 1;
    while ((2 + HC) * HC < M)
        HC++;
    if ((2 + HC) * HC != M || W < HC || W % HC)
        return dsops_fail(DSOPS_ERR_SHAPE, "hc_fn is [%lld, %lld], expected [(2 + HC) * HC, HC * H] with HC, H >= 1",
                          (long long)M, (long long)W);
    dsops_isa isa = ctx ? dsops_context_isa(ctx) : dsops_isa_detected();
    const dsops_hc_kernels *kern = &dsops_kernel_table_get(isa)->hc;
    size_t bytes = HC_HEADER_BYTES + dsops_align64(kern->packed_floats((int)M, (int)HC, W / HC) * 4);
    dsops_prepared *p = calloc(1, sizeof *p);
    void *packed = aligned_alloc(64, bytes);
    if (!p || !packed) {
        free(p);
        free(packed);
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %zu bytes of packed hc_fn", bytes);
    }
    hc_packed_header h = {a->hc_fn.data, M, W, a->hc_fn.stride[0], kern->pack};
    memcpy(packed, &h, sizeof h);
    kern->pack(a->hc_fn.data, (size_t)a->hc_fn.stride[0], (int)M, (int)HC, W / HC,
               (float *)((char *)packed + HC_HEADER_BYTES));
    p->op = HC_PRE_OP;
    p->packed = packed;
    *out = p;
    dsops_clear_error();
    return DSOPS_OK;
}

/* DSOPS_OK when p is NULL or an hc_pre prepared object made from exactly this hc_fn view. */
static dsops_status check_prepared(const dsops_prepared *p, const dsops_tensor *fn)
{
    if (!p)
        return DSOPS_OK;
    if (strcmp(p->op, HC_PRE_OP) != 0 || p->count != 0 || !p->packed)
        return dsops_fail(DSOPS_ERR_PARAM, "prepared was made for %s, not for these hc_pre weights", p->op);
    hc_packed_header h;
    memcpy(&h, p->packed, sizeof h);
    if (h.w != fn->data || h.M != fn->shape[0] || h.W != fn->shape[1] || h.ldw != fn->stride[0])
        return dsops_fail(DSOPS_ERR_PARAM, "prepared was made from another hc_fn");
    return DSOPS_OK;
}

/* hc_fn packed for `kern`: the prepared copy when it was packed by the same function, else NULL. */
static const float *prepared_packing(const dsops_prepared *p, const dsops_hc_kernels *kern)
{
    if (!p)
        return NULL;
    hc_packed_header h;
    memcpy(&h, p->packed, sizeof h);
    return h.pack == kern->pack ? (const float *)((const char *)p->packed + HC_HEADER_BYTES) : NULL;
}

static dsops_status hc_pre_check(const dsops_hc_pre_args *a, int64_t *T, int64_t *HC, int64_t *H)
{
    const unsigned f32 = DSOPS_DT(DSOPS_FP32);
    DSOPS_TRY(dsops_check_tensor(&a->x, "x", 3, DSOPS_DT(DSOPS_BF16), true));
    *T = a->x.shape[0];
    *HC = a->x.shape[1];
    *H = a->x.shape[2];
    if (*HC < 1 || *H < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "x has HC = %lld, H = %lld, expected both >= 1", (long long)*HC, (long long)*H);
    /* x may broadcast a huge HC or H over stride 0 (it holds no element when T = 0): M and W must fit (V3) */
    if (*HC > INT64_MAX / *HC - 2 || *H > INT64_MAX / *HC)
        return dsops_fail(DSOPS_ERR_SHAPE, "x has HC = %lld, H = %lld: M = (2 + HC) * HC or HC * H overflows int64",
                          (long long)*HC, (long long)*H);
    int64_t M = (2 + *HC) * *HC, W = *HC * *H;
    DSOPS_TRY(dsops_check_tensor(&a->hc_fn, "hc_fn", 2, f32, true));
    DSOPS_TRY(dsops_check_dim(&a->hc_fn, "hc_fn", 0, M, "M = (2 + HC) * HC"));
    DSOPS_TRY(dsops_check_dim(&a->hc_fn, "hc_fn", 1, W, "HC * H"));
    DSOPS_TRY(dsops_check_tensor(&a->hc_scale, "hc_scale", 1, f32, false));
    DSOPS_TRY(dsops_check_dim(&a->hc_scale, "hc_scale", 0, 3, "three scales"));
    DSOPS_TRY(dsops_check_tensor(&a->hc_base, "hc_base", 1, f32, false));
    DSOPS_TRY(dsops_check_dim(&a->hc_base, "hc_base", 0, M, "M = (2 + HC) * HC"));
    DSOPS_TRY(dsops_check_tensor(&a->y, "y", 2, DSOPS_DT(DSOPS_BF16), true));
    DSOPS_TRY(dsops_check_dim(&a->y, "y", 0, *T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->y, "y", 1, *H, "H of x"));
    DSOPS_TRY(dsops_check_tensor(&a->post, "post", 2, f32, false));
    DSOPS_TRY(dsops_check_dim(&a->post, "post", 0, *T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->post, "post", 1, *HC, "HC of x"));
    DSOPS_TRY(dsops_check_tensor(&a->comb, "comb", 3, f32, false));
    DSOPS_TRY(dsops_check_dim(&a->comb, "comb", 0, *T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->comb, "comb", 1, *HC, "HC of x"));
    DSOPS_TRY(dsops_check_dim(&a->comb, "comb", 2, *HC, "HC of x"));
    if (dsops_tensor_present(&a->pre)) {
        DSOPS_TRY(dsops_check_tensor(&a->pre, "pre", 2, f32, false));
        DSOPS_TRY(dsops_check_dim(&a->pre, "pre", 0, *T, "T of x"));
        DSOPS_TRY(dsops_check_dim(&a->pre, "pre", 1, *HC, "HC of x"));
    }
    if (a->sinkhorn_iters < 1)
        return dsops_fail(DSOPS_ERR_PARAM, "sinkhorn_iters = %d, expected >= 1", a->sinkhorn_iters);
    DSOPS_TRY(check_eps("norm_eps", a->norm_eps));
    DSOPS_TRY(check_eps("hc_eps", a->hc_eps));
    const dsops_named_tensor outs[] = {{&a->y, "y"}, {&a->post, "post"}, {&a->comb, "comb"}, {&a->pre, "pre"}};
    const dsops_named_tensor ins[] = {{&a->x, "x"}, {&a->hc_fn, "hc_fn"}, {&a->hc_scale, "hc_scale"},
                                      {&a->hc_base, "hc_base"}};
    DSOPS_TRY(dsops_check_outputs_apart(outs, 4, ins, 4));
    return check_prepared(a->prepared, &a->hc_fn);
}

static float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

/* Steps 4-8 of one token from its M mixes (already divided by r). */
static void gates_and_sinkhorn(const dsops_hc_pre_args *a, int64_t t, int64_t HC, const float *mix, float *pre,
                               float *A)
{
    float s0 = *(const float *)dsops_at1(&a->hc_scale, 0), s1 = *(const float *)dsops_at1(&a->hc_scale, 1),
          s2 = *(const float *)dsops_at1(&a->hc_scale, 2), eps = a->hc_eps;
    const dsops_tensor *base = &a->hc_base;
    for (int64_t i = 0; i < HC; i++) {
        pre[i] = sigmoid(mix[i] * s0 + *(const float *)dsops_at1(base, i)) + eps;
        *(float *)dsops_at2(&a->post, t, i) = 2.0f * sigmoid(mix[HC + i] * s1 + *(const float *)dsops_at1(base, HC + i));
        if (dsops_tensor_present(&a->pre))
            *(float *)dsops_at2(&a->pre, t, i) = pre[i];
    }
    for (int64_t k = 0; k < HC * HC; k++)
        A[k] = mix[2 * HC + k] * s2 + *(const float *)dsops_at1(base, 2 * HC + k);
    for (int64_t r = 0; r < HC; r++) { /* row softmax, + eps after the division */
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t c = 0; c < HC; c++)
            mx = A[r * HC + c] > mx ? A[r * HC + c] : mx;
        for (int64_t c = 0; c < HC; c++) {
            A[r * HC + c] = expf(A[r * HC + c] - mx);
            sum += A[r * HC + c];
        }
        for (int64_t c = 0; c < HC; c++)
            A[r * HC + c] = A[r * HC + c] / sum + eps;
    }
    for (int it = 0; it < a->sinkhorn_iters; it++) {
        if (it > 0)
            for (int64_t r = 0; r < HC; r++) { /* rows */
                float sum = 0.0f;
                for (int64_t c = 0; c < HC; c++)
                    sum += A[r * HC + c];
                float inv = 1.0f / (sum + eps); /* v / r as v * (1 / r) (spec §1.7) */
                for (int64_t c = 0; c < HC; c++)
                    A[r * HC + c] = A[r * HC + c] * inv;
            }
        for (int64_t c = 0; c < HC; c++) { /* columns */
            float sum = 0.0f;
            for (int64_t r = 0; r < HC; r++)
                sum += A[r * HC + c];
            float inv = 1.0f / (sum + eps);
            for (int64_t r = 0; r < HC; r++)
                A[r * HC + c] = A[r * HC + c] * inv;
        }
    }
    for (int64_t r = 0; r < HC; r++)
        for (int64_t c = 0; c < HC; c++)
            *(float *)dsops_at3(&a->comb, t, r, c) = A[r * HC + c];
}

/* Steps 2-9 of token t from its undivided mixes m (clobbered) and sum of squares ss. tmp: HC + HC*HC floats. */
static void finish_token(const dsops_hc_pre_args *a, const dsops_hc_kernels *kern, int64_t t, int64_t HC, int64_t H,
                         float *m, float ss, float *tmp)
{
    float *pre = tmp, *A = pre + HC;
    int64_t M = (2 + HC) * HC;
    float r = sqrtf(ss / (float)(HC * H) + a->norm_eps);
    for (int64_t k = 0; k < M; k++)
        m[k] = m[k] / r;
    gates_and_sinkhorn(a, t, HC, m, pre, A);
    kern->weighted_sum(dsops_at3(&a->x, t, 0, 0), (size_t)a->x.stride[1], (int)HC, H, pre, dsops_at2(&a->y, t, 0));
}

dsops_status dsops_hc_pre(dsops_context *ctx, const dsops_hc_pre_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    int64_t T, HC, H;
    DSOPS_TRY(hc_pre_check(a, &T, &HC, &H));
    if (T == 0) {
        dsops_clear_error();
        return DSOPS_OK;
    }
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    int64_t M = (2 + HC) * HC;
    int threads = use->threads;
    const dsops_hc_kernels *kern = &dsops_kernel_table_get(use->isa)->hc;
    /* a token's sums do not depend on the tokens it is grouped with, so small calls use smaller groups
     * and give every thread one */
    int64_t group = (T + threads - 1) / threads;
    group = group < 2 ? 2 : (group + 1) / 2 * 2;
    group = group > HC_TOKEN_GROUP ? HC_TOKEN_GROUP : group;
    int64_t groups = (T + group - 1) / group;
    const float *wp = prepared_packing(a->prepared, kern);
    /* scratch: mixes and sums of squares [T][M + 1], hc_fn packed (unless prepared for this tier), and per
     * thread the mix kernel's work and the epilogue's pre and A */
    size_t mix_bytes = dsops_align64((size_t)T * (size_t)(M + 1) * 4);
    size_t pack_bytes = wp ? 0 : dsops_align64(kern->packed_floats((int)M, (int)HC, H) * 4);
    size_t work_bytes = dsops_align64(kern->mix_work_floats((int)group, (int)M) * 4);
    size_t tmp_bytes = work_bytes + dsops_align64((size_t)(HC + HC * HC) * 4);
    char *scratch = dsops_scratch(use, mix_bytes + pack_bytes + tmp_bytes * (size_t)threads);
    if (!scratch) {
        dsops_context_end(ctx, use);
        return DSOPS_ERR_NOMEM;
    }
    float *mix = (float *)scratch, *ss = mix + T * M;
    char *tmp = scratch + mix_bytes + pack_bytes;
    if (!wp) {
        float *own = (float *)(scratch + mix_bytes);
        kern->pack(a->hc_fn.data, (size_t)a->hc_fn.stride[0], (int)M, (int)HC, H, own);
        wp = own;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(groups < threads ? (int)groups : threads)
    for (int64_t g = 0; g < groups; g++) {
        int64_t t0 = g * group, nt = T - t0 < group ? T - t0 : group;
        char *mine = tmp + tmp_bytes * (size_t)dsops_thread_num();
        kern->mix(dsops_at3(&a->x, t0, 0, 0), (size_t)a->x.stride[0], (size_t)a->x.stride[1], (int)nt, (int)HC, H, wp,
                  (int)M, mix + t0 * M, (size_t)M, ss + t0, (float *)mine);
        /* the group's streams are still in L2 for the weighted sums */
        for (int64_t t = t0; t < t0 + nt; t++)
            finish_token(a, kern, t, HC, H, mix + t * M, ss[t], (float *)(mine + work_bytes));
    }
    dsops_context_end(ctx, use);
    dsops_clear_error();
    return DSOPS_OK;
}

/* ---- hc_post ---------------------------------------------------------------------------------- */

static bool same_view(const dsops_tensor *a, const dsops_tensor *b)
{
    if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->stride[d] != b->stride[d]))
            return false;
    return true;
}

static float load_real(const void *p, dsops_dtype dt)
{
    return dt == DSOPS_BF16 ? dsops_bf16_value(*(const uint16_t *)p) : *(const float *)p;
}

dsops_status dsops_hc_post(dsops_context *ctx, const dsops_hc_post_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    const unsigned real = DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32);
    DSOPS_TRY(dsops_check_tensor(&a->x, "x", 2, real, true));
    int64_t T = a->x.shape[0], H = a->x.shape[1];
    DSOPS_TRY(dsops_check_tensor(&a->residual, "residual", 3, DSOPS_DT(a->x.dtype), true));
    int64_t HC = a->residual.shape[1];
    DSOPS_TRY(dsops_check_dim(&a->residual, "residual", 0, T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->residual, "residual", 2, H, "H of x"));
    if (HC < 1 || H < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "residual has HC = %lld, H = %lld, expected both >= 1", (long long)HC,
                          (long long)H);
    DSOPS_TRY(dsops_check_tensor(&a->post, "post", 2, real, false));
    DSOPS_TRY(dsops_check_dim(&a->post, "post", 0, T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->post, "post", 1, HC, "HC of residual"));
    DSOPS_TRY(dsops_check_tensor(&a->comb, "comb", 3, DSOPS_DT(a->post.dtype), false));
    DSOPS_TRY(dsops_check_dim(&a->comb, "comb", 0, T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->comb, "comb", 1, HC, "HC of residual"));
    DSOPS_TRY(dsops_check_dim(&a->comb, "comb", 2, HC, "HC of residual"));
    DSOPS_TRY(dsops_check_tensor(&a->out, "out", 3, DSOPS_DT(a->x.dtype), true));
    DSOPS_TRY(dsops_check_dim(&a->out, "out", 0, T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->out, "out", 1, HC, "HC of residual"));
    DSOPS_TRY(dsops_check_dim(&a->out, "out", 2, H, "H of x"));
    bool in_place = same_view(&a->out, &a->residual);
    const dsops_named_tensor outs[] = {{&a->out, "out"}};
    const dsops_named_tensor ins[] = {{&a->x, "x"}, {&a->post, "post"}, {&a->comb, "comb"}, {&a->residual, "residual"}};
    DSOPS_TRY(dsops_check_outputs_apart(outs, 1, ins, in_place ? 3 : 4));
    if (T == 0) {
        dsops_clear_error();
        return DSOPS_OK;
    }
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    /* per thread: post, comb as fp32 and the kernel's staging rows */
    size_t per_thread = dsops_align64((size_t)(HC + HC * HC) * 4) + dsops_align64(DSOPS_HC_POST_WORK(HC) * 4);
    char *scratch = dsops_scratch(use, per_thread * (size_t)use->threads);
    if (!scratch) {
        dsops_context_end(ctx, use);
        return DSOPS_ERR_NOMEM;
    }
    /* one thread per HC_POST_MIN_WORK output elements at least: below that, waking a thread costs more than
     * the share of memory traffic it would take over */
    int64_t work = T * HC * H;
    int threads = use->threads;
    if (work / HC_POST_MIN_WORK < threads)
        threads = work / HC_POST_MIN_WORK > 1 ? (int)(work / HC_POST_MIN_WORK) : 1;
    const dsops_hc_kernels *kern = &dsops_kernel_table_get(use->isa)->hc;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < T; t++) {
        char *mine = scratch + per_thread * (size_t)dsops_thread_num();
        float *post = (float *)mine, *comb = post + HC;
        float *stage = (float *)(mine + dsops_align64((size_t)(HC + HC * HC) * 4));
        for (int64_t i = 0; i < HC; i++) {
            post[i] = load_real(dsops_at2(&a->post, t, i), a->post.dtype);
            for (int64_t j = 0; j < HC; j++)
                comb[i * HC + j] = load_real(dsops_at3(&a->comb, t, i, j), a->comb.dtype);
        }
        kern->post_token(dsops_at2(&a->x, t, 0), dsops_at3(&a->residual, t, 0, 0), (size_t)a->residual.stride[1],
                         dsops_at3(&a->out, t, 0, 0), (size_t)a->out.stride[1], (int)HC, H, post, comb,
                         a->x.dtype == DSOPS_FP32, stage);
    }
    dsops_context_end(ctx, use);
    dsops_clear_error();
    return DSOPS_OK;
}
