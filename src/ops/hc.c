/* hc_pre and hc_post (spec §3.1, §3.2): DeepSeek-V4 hyper-connections. The 24-mix reduction of
 * hc_pre runs in the tier's own kernel (bf16 streams read in place, hc_fn packed per call) or, on tiers
 * without one, as an fp32 oneDNN matmul over a widened copy; both in fixed groups of tokens. RMS, gates,
 * Sinkhorn and the weighted sum are per-token epilogues. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "dispatch.h"
#include "linear.h"

/* Tokens per matmul job: fixed, so a token's arithmetic never depends on the thread count. */
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

/* The prepared object of hc_pre holds one map (hc_fn for oneDNN) and, when a tier has the mix kernel, hc_fn
 * packed for it. */
static dsops_linear_source hc_fn_source(const dsops_hc_pre_args *a, int64_t M, int64_t W)
{
    return (dsops_linear_source){"hc_fn", a->hc_fn.data, DSOPS_FP32, M, W, a->hc_fn.stride[0], 1};
}

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
    dsops_linear_source src = hc_fn_source(a, M, W);
    DSOPS_TRY(dsops_prepared_make("hc_pre", &src, 1, out));
    dsops_isa isa = ctx ? dsops_context_isa(ctx) : dsops_isa_detected();
    const dsops_hc_kernels *kern = &dsops_kernel_table_get(isa)->hc;
    if (kern->mix) {
        size_t bytes = dsops_align64(kern->packed_floats((int)M, (int)HC, W / HC) * 4);
        (*out)->packed = aligned_alloc(64, bytes);
        if (!(*out)->packed) {
            dsops_prepared_destroy(*out);
            *out = NULL;
            return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %zu bytes of packed hc_fn", bytes);
        }
        kern->pack(a->hc_fn.data, (size_t)a->hc_fn.stride[0], (int)M, (int)HC, W / HC, (*out)->packed);
    }
    dsops_clear_error();
    return DSOPS_OK;
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
    dsops_linear_source src = hc_fn_source(a, M, W);
    return dsops_prepared_check(a->prepared, "hc_pre", &src, 1);
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

/* Sum of squares of n fp32 values in 16 interleaved partial sums (a fixed order the compiler can vectorise). */
static float sum_of_squares(const float *x, int64_t n)
{
    float part[16] = {0};
    int64_t k = 0;
    for (; k + 16 <= n; k += 16)
        for (int l = 0; l < 16; l++)
            part[l] += x[k + l] * x[k + l];
    for (; k < n; k++)
        part[k % 16] += x[k] * x[k];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            part[l] += part[l + w];
    return part[0];
}

/* Steps 1-3 (before the division by r) through oneDNN: the streams widened to fp32, one fp32 matmul
 * job per fixed group of tokens (full groups together on the threads, a last partial group after). */
static dsops_status mixes_by_matmul(const dsops_hc_pre_args *a, int64_t T, int64_t HC, int64_t H, float *xf,
                                    float *mix, float *ss, int threads, dsops_isa isa)
{
    int64_t M = (2 + HC) * HC, W = HC * H;
    dsops_linear_source src = hc_fn_source(a, M, W);
    const dsops_prepared *prep;
    dsops_prepared *own;
    dsops_status s = dsops_prepared_for_call(a->prepared, "hc_pre", &src, 1, &prep, &own);
    const dsops_linear *map = s == DSOPS_OK ? prep->maps[0] : NULL;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; i < HC; i++)
            dsops_bf16_to_fp32((const uint16_t *)dsops_at3(&a->x, t, i, 0), xf + t * W + i * H, (size_t)H);
        ss[t] = sum_of_squares(xf + t * W, W);
    }
    int64_t full = T / HC_TOKEN_GROUP, rest = T % HC_TOKEN_GROUP;
    dsops_linear_job *jobs = s == DSOPS_OK ? malloc(sizeof *jobs * (size_t)(full + 1)) : NULL;
    if (s == DSOPS_OK && !jobs)
        s = dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %lld matmul jobs", (long long)(full + 1));
    for (int64_t g = 0; s == DSOPS_OK && g <= full; g++)
        jobs[g] = (dsops_linear_job){map, xf + g * HC_TOKEN_GROUP * W, W, mix + g * HC_TOKEN_GROUP * M, M};
    if (s == DSOPS_OK && full > 0)
        s = dsops_linear_run(jobs, (int)full, HC_TOKEN_GROUP, threads, isa);
    if (s == DSOPS_OK && rest > 0)
        s = dsops_linear_run(&jobs[full], 1, rest, 1, isa);
    free(jobs);
    dsops_prepared_destroy(own);
    return s;
}

/* Steps 2-9 of token t from its undivided mixes m (clobbered) and sum of squares ss. tmp: HC + HC*HC + H floats. */
static void finish_token(const dsops_hc_pre_args *a, const dsops_hc_kernels *kern, int64_t t, int64_t HC, int64_t H,
                         float *m, float ss, float *tmp)
{
    float *pre = tmp, *A = pre + HC, *acc = A + HC * HC;
    int64_t M = (2 + HC) * HC;
    float r = sqrtf(ss / (float)(HC * H) + a->norm_eps);
    for (int64_t k = 0; k < M; k++)
        m[k] = m[k] / r;
    gates_and_sinkhorn(a, t, HC, m, pre, A);
    if (kern->weighted_sum) {
        kern->weighted_sum(dsops_at3(&a->x, t, 0, 0), (size_t)a->x.stride[1], (int)HC, H, pre, dsops_at2(&a->y, t, 0));
        return;
    }
    /* y = sum_i pre_i x_i, i ascending, one stream at a time over a row of accumulators */
    for (int64_t d = 0; d < H; d++)
        acc[d] = 0.0f;
    for (int64_t i = 0; i < HC; i++) {
        const uint16_t *xi = dsops_at3(&a->x, t, i, 0);
        for (int64_t d = 0; d < H; d++)
            acc[d] += pre[i] * dsops_bf16_to_f32(xi[d]);
    }
    uint16_t *y = dsops_at2(&a->y, t, 0);
    for (int64_t d = 0; d < H; d++)
        y[d] = dsops_f32_to_bf16(acc[d]);
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
    int64_t M = (2 + HC) * HC, W = HC * H;
    int threads = use->threads;
    const dsops_hc_kernels *kern = &dsops_kernel_table_get(use->isa)->hc;
    /* the own kernel reads x in place (stream rows of unit stride) and hc_fn packed into xf's place;
     * oneDNN needs the widened copy xf */
    size_t mix_bytes = dsops_align64((size_t)T * (size_t)(M + 1) * 4);
    size_t xf_bytes = kern->mix ? dsops_align64(kern->packed_floats((int)M, (int)HC, H) * 4)
                                : dsops_align64((size_t)T * (size_t)W * 4);
    size_t work_bytes = kern->mix ? dsops_align64(DSOPS_HC_MIX_WORK(HC_TOKEN_GROUP, M) * 4) : 0;
    size_t tmp_bytes = dsops_align64((size_t)(HC + HC * HC + H) * 4) + work_bytes; /* pre, A, a row of y sums */
    char *scratch = dsops_scratch(use, mix_bytes + xf_bytes + tmp_bytes * (size_t)threads);
    if (!scratch) {
        dsops_context_end(ctx, use);
        return DSOPS_ERR_NOMEM;
    }
    float *mix = (float *)scratch, *ss = mix + T * M, *xf = (float *)(scratch + mix_bytes);
    char *tmp = scratch + mix_bytes + xf_bytes;
    dsops_status s = DSOPS_OK;
    if (kern->mix) {
        /* a token's sums do not depend on the tokens it is grouped with, so small calls can use smaller
         * groups and give every thread one */
        int64_t group = (T + threads - 1) / threads;
        group = group < 2 ? 2 : (group + 1) / 2 * 2;
        group = group > HC_TOKEN_GROUP ? HC_TOKEN_GROUP : group;
        int64_t groups = (T + group - 1) / group;
        const float *wp = a->prepared && a->prepared->packed ? a->prepared->packed : xf;
        if (wp == xf)
            kern->pack(a->hc_fn.data, (size_t)a->hc_fn.stride[0], (int)M, (int)HC, H, xf);
#pragma omp parallel for schedule(dynamic, 1) num_threads(groups < threads ? (int)groups : threads)
        for (int64_t g = 0; g < groups; g++) {
            int64_t t0 = g * group, nt = T - t0 < group ? T - t0 : group;
            float *work = (float *)(tmp + tmp_bytes * (size_t)dsops_thread_num() + (tmp_bytes - work_bytes));
            kern->mix(dsops_at3(&a->x, t0, 0, 0), (size_t)a->x.stride[0], (size_t)a->x.stride[1], (int)nt, (int)HC, H,
                      wp, (int)M, mix + t0 * M, (size_t)M, ss + t0, work);
            /* the group's streams are still in L2 for the weighted sums */
            for (int64_t t = t0; t < t0 + nt; t++)
                finish_token(a, kern, t, HC, H, mix + t * M, ss[t], (float *)(tmp + tmp_bytes * (size_t)dsops_thread_num()));
        }
    } else {
        s = mixes_by_matmul(a, T, HC, H, xf, mix, ss, threads, use->isa);
    }
    if (s == DSOPS_OK && !kern->mix) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t t = 0; t < T; t++)
            finish_token(a, kern, t, HC, H, mix + t * M, ss[t], (float *)(tmp + tmp_bytes * (size_t)dsops_thread_num()));
    }
    dsops_context_end(ctx, use);
    if (s == DSOPS_OK)
        dsops_clear_error();
    return s;
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
    return dt == DSOPS_BF16 ? dsops_bf16_to_f32(*(const uint16_t *)p) : *(const float *)p;
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
    size_t per_thread = dsops_align64((size_t)(HC * H + HC + HC * HC) * 4);
    char *scratch = dsops_scratch(use, per_thread * (size_t)use->threads);
    if (!scratch) {
        dsops_context_end(ctx, use);
        return DSOPS_ERR_NOMEM;
    }
    bool bf16 = a->x.dtype == DSOPS_BF16;
    /* one thread per HC_POST_MIN_WORK output elements at least: below that, waking a thread costs more than
     * the share of memory traffic it would take over */
    int64_t work = T * HC * H;
    int threads = use->threads;
    if (work / HC_POST_MIN_WORK < threads)
        threads = work / HC_POST_MIN_WORK > 1 ? (int)(work / HC_POST_MIN_WORK) : 1;
    const dsops_hc_kernels *kern = &dsops_kernel_table_get(use->isa)->hc;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < T; t++) {
        float *res = (float *)(scratch + per_thread * (size_t)dsops_thread_num());
        float *post = res + HC * H, *comb = post + HC;
        if (kern->post_token && HC <= DSOPS_HC_POST_MAX_HC) {
            for (int64_t i = 0; i < HC; i++) {
                post[i] = load_real(dsops_at2(&a->post, t, i), a->post.dtype);
                for (int64_t j = 0; j < HC; j++)
                    comb[i * HC + j] = load_real(dsops_at3(&a->comb, t, i, j), a->comb.dtype);
            }
            kern->post_token(dsops_at2(&a->x, t, 0), dsops_at3(&a->residual, t, 0, 0), (size_t)a->residual.stride[1],
                             dsops_at3(&a->out, t, 0, 0), (size_t)a->out.stride[1], (int)HC, H, post, comb, !bf16);
            continue;
        }
        /* every stream of the token is read before any is written (out may alias residual) */
        for (int64_t i = 0; i < HC; i++) {
            const void *row = dsops_at3(&a->residual, t, i, 0);
            if (bf16)
                dsops_bf16_to_fp32(row, res + i * H, (size_t)H);
            else
                memcpy(res + i * H, row, (size_t)H * 4);
            post[i] = load_real(dsops_at2(&a->post, t, i), a->post.dtype);
            for (int64_t j = 0; j < HC; j++)
                comb[i * HC + j] = load_real(dsops_at3(&a->comb, t, i, j), a->comb.dtype);
        }
        const void *xrow = dsops_at2(&a->x, t, 0);
        for (int64_t j = 0; j < HC; j++) {
            void *orow = dsops_at3(&a->out, t, j, 0);
            for (int64_t d = 0; d < H; d++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < HC; i++)
                    acc += comb[i * HC + j] * res[i * H + d];
                float xv = bf16 ? dsops_bf16_to_f32(((const uint16_t *)xrow)[d]) : ((const float *)xrow)[d];
                float v = post[j] * xv + acc;
                if (bf16)
                    ((uint16_t *)orow)[d] = dsops_f32_to_bf16(v);
                else
                    ((float *)orow)[d] = v;
            }
        }
    }
    dsops_context_end(ctx, use);
    dsops_clear_error();
    return DSOPS_OK;
}
